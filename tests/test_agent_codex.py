"""The `codex` agent for real: the Codex CLI installed from the npm registry into the agent cache,
run against the scripted endpoint over the Responses API, its JSON events turned into the
trajectory. The scripted endpoint speaks the Responses API once the model gateway's branch is in;
until then these tests say so and skip."""

from pathlib import Path

import httpx
import pytest

from envloop.core.trajectory import ModelStep, StateStep, ToolStep
from envloop.testing import Received, Reply, ScriptedServer, ScriptedToolCall
from tests.agent_cli_support import MODEL, SECRET, assert_nothing_leaked, echo, kept, model_steps, run_trial

pytestmark = pytest.mark.slow


def speaks_responses() -> bool:
    with ScriptedServer(default=echo) as server:
        answer = httpx.post(f"{server.openai_url}/responses", json={"model": "m", "input": "hi"}, timeout=10)
    return answer.status_code == 200


needs_responses = pytest.mark.skipif(
    not speaks_responses(), reason="the scripted endpoint lacks /v1/responses"
)


def solver(received: Received) -> Reply:
    if any(item.get("type") == "function_call_output" for item in received.messages):
        return Reply(text="The file is in place.")
    call = ScriptedToolCall(name="exec_command", arguments={"cmd": "echo hi > done; echo made"}, id="call_a")
    return Reply(text="Solving it.", tool_calls=[call])


@needs_responses
def test_codex_solves_a_task_with_its_shell_tool_and_is_recorded(tmp_path: Path) -> None:
    with ScriptedServer(default=solver, api_key=SECRET) as server:
        outcome = run_trial(tmp_path, "codex", server.openai_url, REASONING_EFFORT="low")
    assert outcome.status == "completed", outcome.error
    assert (outcome.reward, outcome.stop_reason) == (1.0, "done")
    assert len(server.received) == 2
    for request in server.received:
        assert request.path == "/v1/responses" and request.model == MODEL
        assert request.headers["authorization"] == f"Bearer {SECRET}"
        assert request.body["reasoning"]["effort"] == "low"
    steps = kept(tmp_path).steps
    assert isinstance(steps[1], ToolStep) and steps[1].tool == "install" and steps[1].exit_code == 0
    first, last = model_steps(tmp_path)
    assert (first.text, first.stop) == ("Solving it.", "tool_calls")
    assert (last.text, last.stop) == ("The file is in place.", "end")
    assert outcome.usage["input_tokens"] > 0
    [shell] = [s for s in steps if isinstance(s, ToolStep) and s.tool == "command_execution"]
    assert "echo hi > done; echo made" in (shell.command or "") and shell.exit_code == 0
    assert shell.stdout == "made\n"
    [state] = [s for s in steps if isinstance(s, StateStep)]
    assert [(c.path, c.change) for c in state.changes] == [("done", "created")]
    assert (tmp_path / "artifacts" / "agent" / "codex.jsonl").stat().st_size > 0
    assert_nothing_leaked(tmp_path)


@needs_responses
def test_codex_against_an_echoing_endpoint_ends_with_a_verdict_and_model_steps(tmp_path: Path) -> None:
    with ScriptedServer(default=echo, api_key=SECRET) as server:
        outcome = run_trial(tmp_path, "codex", server.openai_url)
    assert outcome.reward == 0.0, outcome.error
    assert any(isinstance(step, ModelStep) for step in kept(tmp_path).steps)


def test_a_refusing_endpoint_fails_codex_as_model_error(tmp_path: Path) -> None:
    with ScriptedServer(default=lambda _: Reply(status=401, error="bad key")) as server:
        outcome = run_trial(tmp_path, "codex", server.openai_url)
    assert outcome.error is not None and outcome.error.type == "model_error", outcome.error
