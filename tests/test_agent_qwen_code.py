"""The `qwen-code` agent for real: Qwen Code and its own Node.js installed from the npm registry
into the agent cache, run against the scripted Chat Completions endpoint, its stream-json output
turned into the trajectory."""

from pathlib import Path

import pytest

from envloop.core.trajectory import ModelStep, StateStep, SystemStep, ToolStep
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
SHELL = "run_shell_command"


def solver(received: Received) -> Reply:
    if not offers(received, SHELL):
        return Reply(text="ok")
    if tool_results(received) == 0:
        arguments = {"command": "echo hi > done; echo made", "is_background": False, "description": "solve"}
        return Reply(text="Solving it.", tool_calls=[ScriptedToolCall(name=SHELL, arguments=arguments)])
    return Reply(text="The file is in place.")


def test_qwen_code_solves_a_task_with_its_shell_tool_and_is_recorded(tmp_path: Path) -> None:
    with ScriptedServer(default=solver, api_key=SECRET) as server:
        outcome = run_trial(tmp_path, "qwen-code", server.openai_url, TEMPERATURE="0.3")
    assert outcome.status == "completed", outcome.error
    assert (outcome.reward, outcome.stop_reason) == (1.0, "done")
    requests = agent_requests(server, SHELL)
    assert len(requests) == 2
    assert all(r.model == MODEL and r.headers["authorization"] == f"Bearer {SECRET}" for r in requests)
    assert requests[0].body.get("temperature") == 0.3
    steps = kept(tmp_path).steps
    assert isinstance(steps[1], ToolStep) and steps[1].tool == "install" and steps[1].exit_code == 0
    assert any(isinstance(s, SystemStep) and "Qwen Code" in s.text for s in steps)
    first, last = model_steps(tmp_path)
    assert (first.text, first.stop, first.tool_calls[0].name) == ("Solving it.", "tool_calls", SHELL)
    assert first.usage.input_tokens > 0
    assert (last.text, last.stop) == ("The file is in place.", "end")
    [shell] = [s for s in steps if isinstance(s, ToolStep) and s.tool == SHELL]
    assert (shell.command, shell.exit_code, shell.call_id) == (
        "echo hi > done; echo made",
        0,
        first.tool_calls[0].id,
    )
    assert "made" in shell.stdout
    [state] = [s for s in steps if isinstance(s, StateStep)]
    assert [(c.path, c.change) for c in state.changes] == [("done", "created")]
    assert (tmp_path / "artifacts" / "agent" / "qwen-code.jsonl").stat().st_size > 0
    assert_nothing_leaked(tmp_path)


def test_the_step_budget_becomes_qwen_codes_turn_limit(tmp_path: Path) -> None:
    def endless(received: Received) -> Reply:
        if not offers(received, SHELL):
            return Reply(text="ok")
        arguments = {"command": "date >> log.txt", "is_background": False}
        call = ScriptedToolCall(name=SHELL, arguments=arguments, id=f"call_{tool_results(received)}")
        return Reply(text="Again.", tool_calls=[call])

    with ScriptedServer(default=endless) as server:
        outcome = run_trial(tmp_path, "qwen-code", server.openai_url, MAX_STEPS="2")
    assert outcome.stop_reason == "max_steps", outcome.error
    assert len(agent_requests(server, SHELL)) == 2


def test_qwen_code_against_an_echoing_endpoint_ends_with_a_verdict_and_model_steps(tmp_path: Path) -> None:
    with ScriptedServer(default=echo, api_key=SECRET) as server:
        outcome = run_trial(tmp_path, "qwen-code", server.openai_url)
    assert outcome.status == "completed", outcome.error
    assert outcome.reward == 0.0
    assert any(isinstance(step, ModelStep) for step in kept(tmp_path).steps)


def test_a_refusing_endpoint_fails_qwen_code_as_model_error(tmp_path: Path) -> None:
    with ScriptedServer(default=lambda _: Reply(status=401, error="bad key")) as server:
        outcome = run_trial(tmp_path, "qwen-code", server.openai_url)
    assert outcome.error is not None and outcome.error.type == "model_error", outcome.error
