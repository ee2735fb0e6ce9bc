"""The `aider` agent for real: Aider installed from PyPI (as wheels for the sandbox's python3) into
the agent cache, run against the scripted Chat Completions endpoint; its LLM history and applied
edits become the trajectory."""

from pathlib import Path

import pytest

from envloop.core.trajectory import ModelStep, StateStep, ToolStep
from envloop.testing import Reply, ScriptedServer
from tests.agent_cli_support import MODEL, SECRET, assert_nothing_leaked, echo, kept, model_steps, run_trial

pytestmark = pytest.mark.slow
WHOLE_FILE = "Creating it.\n\ndone\n```\nhi\n```\n"


def test_aider_writes_the_file_its_model_answers_with_and_is_recorded(tmp_path: Path) -> None:
    with ScriptedServer(default=lambda _: Reply(text=WHOLE_FILE), api_key=SECRET) as server:
        outcome = run_trial(
            tmp_path, "aider", server.openai_url, AIDER_EDIT_FORMAT="whole", TEMPERATURE="0.3"
        )
    assert outcome.status == "completed", outcome.error
    assert (outcome.reward, outcome.stop_reason) == (1.0, "done")
    assert server.received, "aider never called the endpoint"
    request = server.received[0]
    assert request.model == MODEL and request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.body.get("temperature") == 0.3
    steps = kept(tmp_path).steps
    assert isinstance(steps[1], ToolStep) and steps[1].tool == "install" and steps[1].exit_code == 0
    first = model_steps(tmp_path)[0]
    assert "done\n```\nhi\n```" in first.text
    [edit] = [s for s in steps if isinstance(s, ToolStep) and s.tool == "edit"]
    assert edit.arguments == {"path": "done"}
    [state] = [s for s in steps if isinstance(s, StateStep)]
    assert [(c.path, c.change) for c in state.changes] == [("done", "created")]
    assert (tmp_path / "artifacts" / "agent" / "aider.llm-history.txt").stat().st_size > 0
    assert_nothing_leaked(tmp_path)


def test_aider_against_an_echoing_endpoint_ends_with_a_verdict_and_model_steps(tmp_path: Path) -> None:
    with ScriptedServer(default=echo, api_key=SECRET) as server:
        outcome = run_trial(tmp_path, "aider", server.openai_url)
    assert outcome.reward == 0.0, outcome.error
    assert any(isinstance(step, ModelStep) for step in kept(tmp_path).steps)


def test_a_refusing_endpoint_fails_aider_as_model_error(tmp_path: Path) -> None:
    with ScriptedServer(default=lambda _: Reply(status=401, error="bad key")) as server:
        outcome = run_trial(tmp_path, "aider", server.openai_url)
    assert outcome.error is not None and outcome.error.type == "model_error", outcome.error
