"""The Codex CLI (`codex exec`), which speaks only the OpenAI Responses API, pointed at the model
gateway with a gateway token, against the scripted endpoint: it runs the shell command the script
asks for, and its calls are recorded as model steps whose tokens add up to the CLI's own totals.
The CLI is the codex agent's own install, from the test run's shared agent cache (installed there
from the npm registry the first time)."""

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from envloop.agents.codex import DEFAULT_VERSION, RECIPE
from envloop.gateway import Upstream
from envloop.testing import Received, Reply, ScriptedServer, ScriptedToolCall
from tests.agent_cli_support import cached_program
from tests.gateway_support import GatewayThread, running_gateway

pytestmark = pytest.mark.slow
KEY = "sk-real-upstream-codex-key-93d1"


@pytest.fixture(scope="module")
def codex() -> Path:
    return cached_program(RECIPE, DEFAULT_VERSION)


@pytest.fixture
def gateway() -> Iterator[GatewayThread]:
    with running_gateway(allow_private_upstream=True) as running:
        yield running


def shell_once(received: Received) -> Reply:
    """Run `touch done` with Codex's command tool, then say it is done."""
    if any(item.get("type") == "function_call_output" for item in received.messages):
        return Reply(text="Done.")
    return Reply(
        tool_calls=[ScriptedToolCall(name="exec_command", arguments={"cmd": "touch done"}, id="call_a")]
    )


def test_codex_runs_a_command_through_the_gateway_and_its_totals_are_the_steps(
    codex: Path, gateway: GatewayThread, tmp_path: Path
) -> None:
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    with ScriptedServer(default=shell_once, api_key=KEY) as upstream:
        session = gateway.open(
            Upstream(protocol="openai", base_url=upstream.openai_url, api_key=KEY, model="team/sft")
        )
        (home / "config.toml").write_text(
            'model = "team/sft"\nmodel_provider = "envloop"\n[model_providers.envloop]\nname = "envloop"\n'
            f'base_url = "{session.base_url}"\nenv_key = "MODEL_API_KEY"\nwire_api = "responses"\n'
        )
        flags = ["--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--json"]
        done = subprocess.run(
            [str(codex), "exec", *flags, "Create a file named done."],
            cwd=work,
            env={
                "PATH": os.environ["PATH"],
                "HOME": str(home),
                "CODEX_HOME": str(home),
                "MODEL_API_KEY": session.token,
            },
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        steps = gateway.call(session.steps)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (work / "done").exists() and KEY not in done.stdout + done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    [totals] = [e["usage"] for e in events if e["type"] == "turn.completed"]
    assert len(steps) == len(upstream.received) == 2
    assert totals["input_tokens"] == sum(s.usage.input_tokens for s in steps)
    assert totals["output_tokens"] == sum(s.usage.output_tokens for s in steps)
    first, last = steps
    assert (first.request.protocol, first.stop, first.tool_calls[0].name) == (
        "openai-responses",
        "tool_calls",
        "exec_command",
    )
    assert first.tool_calls[0].arguments == {"cmd": "touch done"} and "exec_command" in first.request.tools
    assert (last.text, last.stop) == ("Done.", "end")
    assert all(
        r.headers["authorization"] == f"Bearer {KEY}" and r.model == "team/sft" for r in upstream.received
    )
