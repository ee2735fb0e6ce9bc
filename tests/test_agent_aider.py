"""The `aider` agent for real: Aider installed from PyPI (as wheels for the sandbox's python3) into
the agent cache, its example profile run with `el` against the scripted Chat Completions endpoint
through the model gateway; the edits it applied become the trial's tool steps."""

from pathlib import Path

import pytest

from envloop.testing import Reply, ScriptedServer
from tests.agent_cli_support import SECRET, assert_solved_through_the_gateway, run_example
from tests.conftest import El

pytestmark = pytest.mark.slow
WHOLE_FILE = "Creating it.\n\nhello.txt\n```\nHello, world!\n```\n"


def test_aider_writes_the_file_its_model_answers_with_through_the_gateway_and_is_recorded(
    cli_el: El, tmp_path: Path
) -> None:
    with ScriptedServer(default=lambda _: Reply(text=WHOLE_FILE), api_key=SECRET) as server:
        run = run_example(cli_el, tmp_path, "aider", server, AIDER_EDIT_FORMAT="whole", TEMPERATURE="0.3")
    assert_solved_through_the_gateway(run, server)
    assert server.received[0].body.get("temperature") == 0.3
    assert "hello.txt\n```\nHello, world!\n```" in run.of_kind("model")[0]["text"]
    [edit] = run.tool("edit")
    assert edit["arguments"] == {"path": "hello.txt"}
    [state] = run.of_kind("state")
    assert [(c["path"], c["change"]) for c in state["changes"]] == [("hello.txt", "created")]
