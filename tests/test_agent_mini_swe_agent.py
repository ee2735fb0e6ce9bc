"""The `mini-swe-agent` agent for real: mini-SWE-agent installed from PyPI (as wheels for the
sandbox's python3) into the agent cache, run against the scripted Chat Completions endpoint, its
trajectory file turned into the trial's trajectory."""

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
    run_trial,
    tool_results,
)

pytestmark = pytest.mark.slow
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def solver(received: Received) -> Reply:
    done = tool_results(received)
    command = "echo hi > done; echo made" if done == 0 else SUBMIT
    call = ScriptedToolCall(name="bash", arguments={"command": command}, id=f"call_{done}")
    return Reply(text="Solving it." if done == 0 else "Submitting.", tool_calls=[call])


def test_mini_swe_agent_solves_a_task_with_its_bash_tool_and_is_recorded(tmp_path: Path) -> None:
    with ScriptedServer(default=solver, api_key=SECRET) as server:
        outcome = run_trial(tmp_path, "mini-swe-agent", server.openai_url, TEMPERATURE="0.3")
    assert outcome.status == "completed", outcome.error
    assert (outcome.reward, outcome.stop_reason) == (1.0, "done")
    requests = agent_requests(server, "bash")
    assert len(requests) == 2
    assert all(r.model == MODEL and r.headers["authorization"] == f"Bearer {SECRET}" for r in requests)
    assert requests[0].body.get("temperature") == 0.3
    steps = kept(tmp_path).steps
    assert isinstance(steps[1], ToolStep) and steps[1].tool == "install" and steps[1].exit_code == 0
    first, last = model_steps(tmp_path)
    assert (first.text, first.stop, first.tool_calls[0].name) == ("Solving it.", "tool_calls", "bash")
    assert first.usage.input_tokens > 0
    assert last.tool_calls[0].arguments == {"command": SUBMIT}
    bash = [s for s in steps if isinstance(s, ToolStep) and s.tool == "bash"]
    assert (bash[0].command, bash[0].exit_code, bash[0].call_id) == ("echo hi > done; echo made", 0, "call_0")
    assert bash[0].stdout == "made\n"
    [state] = [s for s in steps if isinstance(s, StateStep)]
    assert [(c.path, c.change) for c in state.changes] == [("done", "created")]
    assert (tmp_path / "artifacts" / "agent" / "mini-swe-agent.traj.json").stat().st_size > 0
    assert_nothing_leaked(tmp_path)


def test_the_step_budget_becomes_mini_swe_agents_step_limit(tmp_path: Path) -> None:
    def endless(received: Received) -> Reply:
        call = ScriptedToolCall(
            name="bash", arguments={"command": "date"}, id=f"call_{tool_results(received)}"
        )
        return Reply(text="Again.", tool_calls=[call])

    with ScriptedServer(default=endless) as server:
        outcome = run_trial(tmp_path, "mini-swe-agent", server.openai_url, MAX_STEPS="2")
    assert (outcome.stop_reason, outcome.error) == ("max_steps", None)
    assert len(server.received) == 2


def test_mini_swe_agent_against_an_echoing_endpoint_ends_with_a_verdict_and_model_steps(
    tmp_path: Path,
) -> None:
    with ScriptedServer(default=echo, api_key=SECRET) as server:
        outcome = run_trial(tmp_path, "mini-swe-agent", server.openai_url, MAX_STEPS="3")
    assert outcome.reward == 0.0, outcome.error
    assert any(isinstance(step, ModelStep) for step in kept(tmp_path).steps)


def test_a_refusing_endpoint_fails_mini_swe_agent_as_model_error(tmp_path: Path) -> None:
    with ScriptedServer(default=lambda _: Reply(status=401, error="bad key")) as server:
        outcome = run_trial(tmp_path, "mini-swe-agent", server.openai_url)
    assert outcome.error is not None and outcome.error.type == "model_error", outcome.error
