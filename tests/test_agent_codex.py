"""The `codex` agent for real: the Codex CLI installed from the npm registry into the agent cache,
its example profile run with `el` against the scripted endpoint's Responses API through the model
gateway, its JSON events turned into the trial's tool steps."""

from pathlib import Path

import pytest

from envloop.testing import Received, Reply, ScriptedServer, ScriptedToolCall
from tests.agent_cli_support import (
    SECRET,
    SOLVE,
    assert_only_the_token_inside,
    assert_solved_through_the_gateway,
    run_example,
    sandbox_environment,
)
from tests.conftest import El

pytestmark = pytest.mark.slow


def solver(received: Received) -> Reply:
    if any(item.get("type") == "function_call_output" for item in received.messages):
        return Reply(text="The file is in place.")
    call = ScriptedToolCall(name="exec_command", arguments={"cmd": SOLVE}, id="call_a")
    return Reply(text="Solving it.", tool_calls=[call])


def test_codex_solves_the_example_task_over_the_responses_api_and_its_commands_are_recorded(
    cli_el: El, tmp_path: Path
) -> None:
    with ScriptedServer(default=solver, api_key=SECRET) as server:
        run = run_example(cli_el, tmp_path, "codex", server, REASONING_EFFORT="low")
    assert_solved_through_the_gateway(run, server)
    assert len(server.received) == 2
    for request in server.received:
        assert request.path == "/v1/responses" and request.body["reasoning"]["effort"] == "low"
    first, last = run.of_kind("model")
    assert first["tool_calls"][0]["name"] == "exec_command" and last["text"] == "The file is in place."
    [shell] = run.tool("command_execution")
    assert "hello.txt; echo made; env | base64 -w0" in shell["command"]
    assert_only_the_token_inside(sandbox_environment(shell))
    [state] = run.of_kind("state")
    assert [(c["path"], c["change"]) for c in state["changes"]] == [("hello.txt", "created")]
