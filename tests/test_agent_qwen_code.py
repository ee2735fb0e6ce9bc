"""The `qwen-code` agent for real: Qwen Code and its own Node.js installed from the npm registry
into the agent cache, its example profile run with `el` against the scripted Chat Completions
endpoint through the model gateway, its stream-json output turned into the trial's tool steps."""

from pathlib import Path

import pytest

from envloop.testing import Received, Reply, ScriptedServer, ScriptedToolCall
from tests.agent_cli_support import (
    SECRET,
    SOLVE,
    agent_requests,
    assert_only_the_token_inside,
    assert_solved_through_the_gateway,
    offers,
    run_example,
    sandbox_environment,
    tool_results,
)
from tests.conftest import El

pytestmark = pytest.mark.slow
SHELL = "run_shell_command"
WITHOUT_TERMINAL = f"[ ! -t 1 ] && {SOLVE}; sleep 1"
"""`SOLVE`, only where the shell tool gives the command no terminal: the agent's settings make Qwen
Code run commands as plain child processes, whose whole output reaches the model. The command
outlives its output by a second: on a loaded machine Qwen Code's shell tool once kept only the
output's first line, as if it stopped reading when the command ended."""


def solver(received: Received) -> Reply:
    if not offers(received, SHELL):
        return Reply(text="ok")
    if tool_results(received) == 0:
        arguments = {"command": WITHOUT_TERMINAL, "is_background": False, "description": "solve"}
        return Reply(text="Solving it.", tool_calls=[ScriptedToolCall(name=SHELL, arguments=arguments)])
    return Reply(text="The file is in place.")


def test_qwen_code_solves_the_example_task_through_the_gateway_and_its_shell_tool_is_recorded(
    cli_el: El, tmp_path: Path
) -> None:
    with ScriptedServer(default=solver, api_key=SECRET) as server:
        run = run_example(cli_el, tmp_path, "qwen-code", server, TEMPERATURE="0.3")
    assert_solved_through_the_gateway(run, server)
    requests = agent_requests(server, SHELL)
    assert len(requests) == 2 and requests[0].body.get("temperature") == 0.3
    assert any("Qwen Code" in step["text"] for step in run.of_kind("system"))
    first = next(s for s in run.of_kind("model") if s["tool_calls"])
    [shell] = run.tool(SHELL)
    assert (shell["command"], shell["call_id"]) == (WITHOUT_TERMINAL, first["tool_calls"][0]["id"])
    assert_only_the_token_inside(sandbox_environment(shell))
    [state] = run.of_kind("state")
    assert [(c["path"], c["change"]) for c in state["changes"]] == [("hello.txt", "created")]
