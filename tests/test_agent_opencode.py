"""The `opencode` agent for real: OpenCode installed from the npm registry into the agent cache,
run against the scripted Chat Completions endpoint, its JSON events turned into the trajectory."""

from pathlib import Path

import pytest

from envloop.core.trajectory import ModelStep, StateStep, ToolStep
from envloop.testing import Received, Reply, ScriptedServer, ScriptedToolCall
from tests.agent_cli_support import (
    MODEL,
    SECRET,
    agent_requests,
    assert_nothing_leaked,
    echo,
    kept,
    model_steps,
    offers,
    run_trial,
    tool_results,
)

pytestmark = pytest.mark.slow


def solver(received: Received) -> Reply:
    if not offers(received, "bash"):
        return Reply(text="A title")
    if tool_results(received) == 0:
        call = ScriptedToolCall(
            name="bash", arguments={"command": "echo hi > done; echo made", "description": "solve"}
        )
        return Reply(text="Solving it.", tool_calls=[call])
    return Reply(text="The file is in place.")


def test_opencode_solves_a_task_through_its_bash_tool_and_is_recorded(tmp_path: Path) -> None:
    with ScriptedServer(default=solver, api_key=SECRET) as server:
        outcome = run_trial(tmp_path, "opencode", server.openai_url, TEMPERATURE="0.3", MAX_STEPS="5")
    assert outcome.status == "completed", outcome.error
    assert (outcome.reward, outcome.stop_reason) == (1.0, "done")
    requests = agent_requests(server, "bash")
    assert len(requests) == 2
    assert all(r.model == MODEL and r.headers["authorization"] == f"Bearer {SECRET}" for r in requests)
    assert requests[0].body.get("temperature") == 0.3
    steps = kept(tmp_path).steps
    kinds = [step.kind for step in steps]
    assert kinds[:2] == ["user", "tool"] and kinds[-1] == "verifier"
    install = steps[1]
    assert isinstance(install, ToolStep) and install.tool == "install" and install.exit_code == 0
    first, last = model_steps(tmp_path)
    assert (first.text, first.stop, first.tool_calls[0].name) == ("Solving it.", "tool_calls", "bash")
    assert first.usage.input_tokens > 0
    assert (last.text, last.stop) == ("The file is in place.", "end")
    [bash] = [s for s in steps if isinstance(s, ToolStep) and s.tool == "bash"]
    assert (bash.command, bash.exit_code, bash.call_id) == (
        "echo hi > done; echo made",
        0,
        first.tool_calls[0].id,
    )
    assert "made" in bash.stdout
    [state] = [s for s in steps if isinstance(s, StateStep)]
    assert [(c.path, c.change) for c in state.changes] == [("done", "created")]
    assert (tmp_path / "artifacts" / "agent" / "opencode.jsonl").stat().st_size > 0
    assert (tmp_path / "artifacts" / "agent" / "install.log").exists()
    assert_nothing_leaked(tmp_path)


def test_opencode_against_an_echoing_endpoint_ends_with_a_verdict_and_model_steps(tmp_path: Path) -> None:
    with ScriptedServer(default=echo, api_key=SECRET) as server:
        outcome = run_trial(tmp_path, "opencode", server.openai_url)
    assert outcome.status == "completed", outcome.error
    assert outcome.reward == 0.0
    assert any(isinstance(step, ModelStep) for step in kept(tmp_path).steps)


def test_a_refusing_endpoint_fails_opencode_as_model_error(tmp_path: Path) -> None:
    with ScriptedServer(default=lambda _: Reply(status=401, error="bad key")) as server:
        outcome = run_trial(tmp_path, "opencode", server.openai_url)
    assert outcome.error is not None and outcome.error.type == "model_error", outcome.error
