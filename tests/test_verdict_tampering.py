"""A hostile agent that cannot solve the task tries to make the verifier's own runtime write the
reward: Python's user site (`.pth`, `usercustomize`), git's configuration (`core.fsmonitor`), pip's
configuration, shell start-up files. The verifier here runs Python, git and pip the way real
verifiers do and writes 0 unless something else wrote a reward first.

In the local sandbox the verifier gets a HOME of its own, so nothing an agent left there runs; a job
that wants its verifiers apart also gives it a `/tmp` of its own.
"""

import asyncio
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments import LocalEnvironmentProvider
from envloop.environments.local.bwrap import bwrap_executable
from envloop.runners import ShellRunner
from tests.conftest import captured
from tests.docker_daemon import docker_daemon

__all__ = ["docker_daemon"]

FORGE = "open(__import__('os').environ['ENVLOOP_LOGS_DIR'] + '/verifier/reward.txt', 'w').write('1')"
WRITE_ONE = "echo 1 > $ENVLOOP_LOGS_DIR/verifier/reward.txt"
HOSTILE = f"""\
site=$(python3 -c 'import site; print(site.getusersitepackages())')
mkdir -p "$site" "$HOME/.config/pip"
echo "import os; {FORGE}" > "$site/evil.pth"
echo "{FORGE}" > "$site/usercustomize.py"
printf '[core]\\n\\tfsmonitor = "sh -c \\\\"%s\\\\"; false"\\n' '{WRITE_ONE}' > "$HOME/.gitconfig"
printf '[global]\\nindex-url = http://127.0.0.1:9/forged\\n' > "$HOME/.config/pip/pip.conf"
echo '{WRITE_ONE}' | tee "$HOME/.bashrc" "$HOME/.profile" "$HOME/.bash_profile"
"""
VERIFIER = """\
#!/usr/bin/env bash
logs="${ENVLOOP_LOGS_DIR:-/logs}"
python3 -c 'pass'
repo=$(mktemp -d) && git init -q "$repo" && git -C "$repo" status >/dev/null 2>&1
python3 -m pip config list > "$logs/verifier/pip-config.txt" 2>&1 || true
bash -lc true
[ -f "$logs/verifier/reward.txt" ] || echo 0 > "$logs/verifier/reward.txt"
"""


def hostile_spec(
    tmp_path: Path,
    agent: str,
    verifier: str,
    verifier_environment: str = "task",
    dockerfile: str | None = None,
) -> TrialSpec:
    """One trial of an impossible task whose command agent is `agent` and verifier `verifier`."""
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "environment").mkdir()
    (task / "task.toml").write_text('version = "1.0"\n')
    (task / "instruction.md").write_text("An impossible task.\n")
    (task / "tests" / "test.sh").write_text(verifier)
    if dockerfile is not None:
        (task / "environment" / "Dockerfile").write_text(dockerfile)
    return TrialSpec(
        job_id="job_tamper",
        trial_id=new_id("trl"),
        task_name="task",
        attempt=1,
        profile_ref="team/hostile@1",
        runner="envloop/shell@1",
        params={"AGENT_NAME": "command", "AGENT_COMMAND": agent},
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
        verifier_environment=verifier_environment,  # type: ignore[arg-type]
    )


def run_hostile(
    tmp_path: Path, mode: str, agent: str = HOSTILE, verifier: str = VERIFIER, apart: bool = False
) -> TrialOutcome:
    spec = hostile_spec(tmp_path, agent, verifier, "separate" if apart else "task")
    return asyncio.run(ShellRunner(LocalEnvironmentProvider(mode)).run(spec))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param("bwrap", marks=pytest.mark.skipif(bwrap_executable()[0] is None, reason="no bwrap")),
        "plain",
    ],
)
def test_nothing_the_agent_left_in_its_home_runs_as_part_of_the_verifier(tmp_path: Path, mode: str) -> None:
    outcome = run_hostile(tmp_path, mode)
    assert outcome.error is None, outcome.error
    assert captured(tmp_path / "artifacts" / "agent" / "stderr.txt") == ""
    assert outcome.reward == 0.0
    assert "forged" not in (tmp_path / "artifacts" / "verifier" / "pip-config.txt").read_text()


TMP_PLANTER = """\
echo 1 > /tmp/verdict.txt
mkfifo /tmp/stall
"""
TMP_TRUSTING_VERIFIER = """\
#!/usr/bin/env bash
logs="${ENVLOOP_LOGS_DIR:-/logs}"
ls -A /tmp > "$logs/verifier/tmp-seen.txt"
cat /tmp/verdict.txt > "$logs/verifier/reward.txt" 2>/dev/null || echo 0 > "$logs/verifier/reward.txt"
"""


@pytest.mark.skipif(bwrap_executable()[0] is None, reason="no bwrap")
@pytest.mark.parametrize("apart", [False, True])
def test_a_job_that_wants_its_verifiers_apart_gives_the_local_verifier_a_tmp_of_its_own(
    tmp_path: Path, apart: bool
) -> None:
    """Harbor's shared verifier sees the agent's /tmp (its own example tasks check that it does); a job
    submitted with `--verifier-environment separate` where no separate environment exists keeps
    everything the agent left in /tmp (a planted verdict, a named pipe) out of the verifier's sight."""
    outcome = run_hostile(tmp_path, "bwrap", TMP_PLANTER, TMP_TRUSTING_VERIFIER, apart=apart)
    assert outcome.error is None, outcome.error
    seen = (tmp_path / "artifacts" / "verifier" / "tmp-seen.txt").read_text().split()
    if apart:
        assert (outcome.reward, seen) == (0.0, [])
        handoff = (tmp_path / "artifacts" / "handoff" / "output.txt").read_text()
        assert "from a HOME and a /tmp of its own" in handoff
    else:
        assert outcome.reward == 1.0
        assert {"verdict.txt", "stall"} <= set(seen)
    # The agent's /tmp is its own again afterwards: nothing of the verifier's run is left in it.
    assert not (tmp_path / "instances").exists() or not any((tmp_path / "instances").iterdir())


DOCKER_HOSTILE = f"""\
site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
mkdir -p "$site"
echo "import os; {FORGE}" > "$site/evil.pth"
printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > /usr/local/bin/git && chmod +x /usr/local/bin/git
"""
DOCKER_VERIFIER = """\
#!/usr/bin/env bash
python3 -c 'pass'
git --version >/dev/null 2>&1
[ -f /logs/verifier/reward.txt ] || echo 0 > /logs/verifier/reward.txt
"""


def run_hostile_container(tmp_path: Path, verifier_environment: str) -> TrialOutcome:
    from envloop.environments.docker.images import BuildRecords  # noqa: PLC0415
    from envloop.environments.docker.provider import DockerEnvironmentProvider  # noqa: PLC0415

    dockerfile = "FROM python:3.11-slim\nWORKDIR /app\n"
    spec = hostile_spec(tmp_path, DOCKER_HOSTILE, DOCKER_VERIFIER, verifier_environment, dockerfile)
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    return asyncio.run(ShellRunner(provider).run(spec))


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("docker_daemon")
def test_a_root_agents_changes_to_the_verifiers_runtime_are_flagged_and_a_separate_verifier_is_untouched(
    tmp_path: Path,
) -> None:
    shared = run_hostile_container(tmp_path / "shared", "task")
    # Run where the task says, the agent's changes reach the verifier; the trial says what they were.
    flagged = {flag.detail.split(" ", 1)[1]: flag.paths for flag in shared.flags if flag.kind == "tamper"}
    assert shared.reward == 1.0  # a flag never changes a reward by itself
    pth = flagged["python import path change read by the verifier"]
    assert any(path.endswith("evil.pth") for path in pth), shared.flags
    assert "/usr/local/bin/git" in flagged["binary on PATH change read by the verifier"], shared.flags
    apart = run_hostile_container(tmp_path / "apart", "separate")
    assert apart.error is None, apart.error
    assert apart.reward == 0.0
    assert (
        "verifier: a fresh environment"
        in (tmp_path / "apart" / "artifacts" / "handoff" / "output.txt").read_text()
    )
