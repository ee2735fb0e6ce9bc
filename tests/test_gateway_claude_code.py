"""The Claude Code CLI on this machine, pointed at the model gateway with a gateway token as its
key (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY), as an agent inside a sandbox will be: against the
scripted endpoint it solves a task with its Bash tool; every call it makes is a recorded model
step, and the real key never reaches it. The same path to `el model serve` and the bundled model
is tests/test_claude_code_local.py's trial, whose agent reaches the model through its worker's
gateway (reading Claude Code's prompt takes that model minutes, so it is read once in the suite).

The CLI is the claude-code agent's own install, from the test run's shared agent cache (installed
there from the npm registry the first time, as tests/test_claude_code.py's trials find it)."""

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envloop.agents.claude_code import DEFAULT_VERSION, MODEL_ROLES, QUIET, RECIPE
from envloop.gateway import GatewaySession, Upstream
from envloop.testing import ScriptedServer
from tests.agent_cli_support import cached_program
from tests.gateway_support import GatewayThread, running_gateway
from tests.test_claude_code import solver

pytestmark = pytest.mark.slow
KEY = "sk-ant-real-upstream-key-51c0"


@pytest.fixture(scope="module")
def claude() -> Path:
    return cached_program(RECIPE, DEFAULT_VERSION)


@pytest.fixture
def gateway() -> Iterator[GatewayThread]:
    with running_gateway(allow_private_upstream=True) as running:
        yield running


def run_claude(
    claude: Path, session: GatewaySession, tmp_path: Path, max_turns: int, timeout: float
) -> list[dict[str, Any]]:
    """`claude -p` on the task's instruction, as the claude-code agent runs it, with the gateway's
    address and token only; its stream-json events."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    model = session.upstream.model or "m"
    variables = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        **QUIET,
        **dict.fromkeys(MODEL_ROLES, model),
        "ANTHROPIC_BASE_URL": session.base_url,
        "ANTHROPIC_API_KEY": session.token,
    }
    flags = ["--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"]
    done = subprocess.run(
        [str(claude), "-p", *flags, "--model", model, "--max-turns", str(max_turns)],
        input="Create a file named done in the current directory.",
        cwd=work,
        env=variables,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert KEY not in done.stdout + done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert events, f"claude exited {done.returncode}: {done.stderr[-2000:]}"
    return events


def test_claude_code_solves_a_task_through_the_gateway_and_every_call_is_a_step(
    claude: Path, gateway: GatewayThread, tmp_path: Path
) -> None:
    with ScriptedServer(default=solver("touch done"), api_key=KEY) as upstream:
        session = gateway.open(
            Upstream(
                protocol="anthropic", base_url=upstream.anthropic_url, api_key=KEY, model="team-model/sft"
            )
        )
        events = run_claude(claude, session, tmp_path, max_turns=4, timeout=600)
        time.sleep(0.2)  # the CLI may leave side requests ending as it exits
        steps = gateway.call(session.steps)
    assert (tmp_path / "work" / "done").exists()
    assert events[-1]["type"] == "result" and events[-1]["subtype"] == "success"
    assert len(steps) == len(upstream.received) >= 2
    assert all(
        r.headers["x-api-key"] == KEY and session.token not in json.dumps(r.headers)
        for r in upstream.received
    )
    assert all(s.error is None and s.http_status == 200 and s.usage.input_tokens > 0 for s in steps)
    solving = next(s for s in steps if s.tool_calls)
    assert (solving.tool_calls[0].name, solving.tool_calls[0].arguments["command"]) == ("Bash", "touch done")
    # Each answer the CLI read is a recorded step, and the CLI's token totals are the steps' sums.
    assert {e["message"]["id"] for e in events if e["type"] == "assistant"} <= {s.response_id for s in steps}
    totals = events[-1]["usage"]
    assert totals["input_tokens"] == sum(s.usage.input_tokens for s in steps)
    assert totals["output_tokens"] == sum(s.usage.output_tokens for s in steps)
    assert all(s.request.model == "team-model/sft" and "Bash" in s.request.tools for s in steps)
    assert all(KEY not in s.model_dump_json() for s in steps)
