"""`module:Name` references in a profile's AGENT_NAME: a profile is API input, so a reference
imports nothing unless it names an installed envloop plugin or a module the operator allows in
ENVLOOP_PLUGIN_MODULES; allowed, it runs behind the same protocol and typed params as any agent."""

from pathlib import Path

import pytest

from envloop.runners import ShellRunner
from envloop.runners.params import check_params, unread_params

AGENT_MODULE = """
from pathlib import Path
from envloop.agents import AgentContext, AgentInfo, AgentResult
from envloop.plugins import ComponentParams, param

Path({marker!r}).write_text("imported")


class Params(ComponentParams):
    LEVEL: int = param("how hard to try", default=1, ge=1)


class Agent:
    info = AgentInfo(name="local", description="a quick local class")
    params_model = Params

    async def run(self, ctx: AgentContext) -> AgentResult:
        return AgentResult(exit_code=0)


class Shapeless:
    pass
"""


@pytest.fixture
def module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> tuple[str, Path]:
    """A module on the path that leaves a marker when imported; named per test (imports are cached)."""
    name = f"quick_agent_{request.node.name.replace('[', '_').replace(']', '_').replace('-', '_')}"
    marker = tmp_path / "imported"
    (tmp_path / f"{name}.py").write_text(AGENT_MODULE.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("ENVLOOP_PLUGIN_MODULES", raising=False)
    return name, marker


def test_a_reference_the_operator_did_not_allow_is_refused_before_any_import(
    module: tuple[str, Path],
) -> None:
    name, marker = module
    problems = check_params(ShellRunner(), {"AGENT_NAME": f"{name}:Agent"})
    assert problems == [
        f"agent reference '{name}:Agent' is not allowed: module:Name references resolve only to installed "
        "envloop plugins or to modules the operator lists in ENVLOOP_PLUGIN_MODULES"
    ]
    assert not marker.exists()
    assert check_params(ShellRunner(), {"AGENT_NAME": "os:system"})[0].startswith(
        "agent reference 'os:system' is not allowed"
    )


@pytest.mark.parametrize("reference", ["os.system", "a:b:c", "../x:Y", "x:", ":Y", "x y:Z"])
def test_malformed_references_are_refused(reference: str) -> None:
    [problem] = check_params(ShellRunner(), {"AGENT_NAME": reference})
    assert problem.startswith(("unknown agent", f"agent reference {reference!r} is not of the form"))


def test_an_allowed_reference_runs_behind_the_same_typed_params(
    module: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    name, marker = module
    monkeypatch.setenv("ENVLOOP_PLUGIN_MODULES", f"elsewhere, {name}")
    reference = f"{name}:Agent"
    assert check_params(ShellRunner(), {"AGENT_NAME": reference, "LEVEL": "3"}) == []
    assert marker.exists()
    assert check_params(ShellRunner(), {"AGENT_NAME": reference, "LEVEL": "0"}) == [
        "LEVEL must be a whole number ≥ 1, not '0'"
    ]
    unread = unread_params(ShellRunner(), {"AGENT_NAME": reference, "MODEL_NAME": "m"})
    assert (unread.names, unread.ignored_by) == (["MODEL_NAME"], f"agent '{reference}'")
    assert check_params(ShellRunner(), {"AGENT_NAME": f"{name}:Shapeless"}) == [
        f"agent reference '{name}:Shapeless' is not an agent: it has no info = AgentInfo(...)"
    ]
    assert check_params(ShellRunner(), {"AGENT_NAME": f"{name}:Missing"}) == [
        f"agent reference '{name}:Missing': module {name} has no Missing"
    ]
