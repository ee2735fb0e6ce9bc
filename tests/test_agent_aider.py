"""The `aider` agent for real: Aider installed from PyPI (as wheels for the sandbox's python3) into
the agent cache, its example profile run with `el` against the scripted Chat Completions endpoint
through the model gateway; the edits it applied become the trial's tool steps. On a cold cache the
install is the trial's agent setup phase, never the agent's time; and, since Aider has no step limit of
its own, it is stopped by the gateway at the job's --max-steps."""

import asyncio
import shutil
from pathlib import Path

import pytest

from envloop.agents.aider import DEFAULT_VERSION
from envloop.agents.cache import CACHE_VARIABLE
from envloop.core.ids import new_id
from envloop.core.trajectory import ModelStep, ToolStep
from envloop.core.trial import PhaseRecord, TrialSpec
from envloop.runners import ShellRunner
from envloop.testing import Reply, ScriptedServer
from envloop.trajectories import read_trajectory
from tests.agent_cli_support import MODEL, SECRET, TASKS, assert_solved_through_the_gateway, run_example
from tests.conftest import El

pytestmark = pytest.mark.slow
WHOLE_FILE = "Creating it.\n\nhello.txt\n```\nHello, world!\n```\n"
LINT_BAIT = WHOLE_FILE + "\nbroken.py\n```\ndef broken(:\n```\n"
"""The example task's file, and a Python file Aider's linter finds broken: it asks its model to fix it."""


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


def test_a_cold_cache_installs_aider_in_its_setup_phase_and_it_reaches_its_model_within_20_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent cache of its own, empty, and a task whose agent may take 20 s (a cold install alone
    took 44 s when it was the agent's): the install (pip's wheels for the sandbox's Python,
    compiled) is the setup phase's, recorded with its duration, then Aider starts, reaches the model
    within its own 20 s and the verifier scores what it wrote."""
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cold-cache"))
    task = shutil.copytree(TASKS / "hello-cli", tmp_path / "tasks" / "hello-cli")
    config = task / "task.toml"
    config.write_text(config.read_text().replace("timeout_sec = 1800.0", "timeout_sec = 20.0"))
    with ScriptedServer(default=lambda _: Reply(text=WHOLE_FILE), api_key=SECRET) as server:
        params = {
            "AGENT_NAME": "aider",
            "AGENT_VERSION": DEFAULT_VERSION,
            "MODEL_PROTOCOL": "openai",
            "MODEL_BASE_URL": server.openai_url,
            "MODEL_NAME": MODEL,
            "MODEL_API_KEY": SECRET,
            "AIDER_EDIT_FORMAT": "whole",
        }
        spec = TrialSpec(
            job_id="job_cold",
            trial_id=new_id("trl"),
            task_name=task.name,
            attempt=1,
            profile_ref="team/aider@1",
            runner="envloop/shell@1",
            params=params,
            secret_values=(SECRET,),
            task_dir=task,
            instance_root=tmp_path / "instances",
            artifacts_dir=tmp_path / "artifacts",
        )
        outcome = asyncio.run(ShellRunner().run(spec))
    reached = len(server.received)
    assert (outcome.status, outcome.reward) == ("completed", 1.0), f"{outcome.error}; model calls: {reached}"
    phases = {phase.name: phase for phase in outcome.phases}
    assert list(phases)[:3] == ["setup", "agent_setup", "agent"]
    assert not phases["agent_setup"].timed_out and not phases["agent"].timed_out
    steps = read_trajectory(tmp_path / "artifacts" / "trajectory.json").steps
    install = steps[0]
    assert isinstance(install, ToolStep) and install.tool == "install" and install.exit_code == 0
    assert install.stdout is not None and ": installed in " in install.stdout  # cold: made now
    setup = phases["agent_setup"]
    assert install.duration_ms is not None
    assert 0 < install.duration_ms / 1000 <= _seconds(setup)
    assert server.received and len([s for s in steps if isinstance(s, ModelStep)]) == len(server.received)
    assert (tmp_path / "artifacts" / "agent" / "install.log").read_text().startswith("$ ")


def _seconds(phase: PhaseRecord) -> float:
    return (phase.ended_at - phase.started_at).total_seconds()


FENCE = "```"
NEVER_MATCHES = (
    "Creating it.\n\n"
    f"hello.txt\n{FENCE}\n<<<<<<< SEARCH\n=======\nHello, world!\n>>>>>>> REPLACE\n{FENCE}\n\n"
    f"hello.txt\n{FENCE}\n<<<<<<< SEARCH\nGoodbye\n=======\nHello again\n>>>>>>> REPLACE\n{FENCE}\n"
)
"""An edit that creates the file and one that can never apply: Aider sends its model the failure
to fix, again and again (its reflections), so it would go on past a step limit of two."""


def test_aider_is_stopped_by_the_gateway_at_the_jobs_max_steps_and_the_trial_says_so(
    cli_el: El, tmp_path: Path
) -> None:
    with ScriptedServer(default=lambda _: Reply(text=NEVER_MATCHES), api_key=SECRET) as server:
        run = run_example(cli_el, tmp_path, "aider", server, ("--max-steps", "2"), AIDER_EDIT_FORMAT="diff")
    assert len(server.received) == 2  # the third call never left the gateway
    # Scored, not failed: 0, since the answer repeated after the first failure added the line twice.
    assert (run.trial["status"], run.trial["reward"], run.trial["error_type"]) == ("completed", 0.0, None)
    assert run.trajectory["stop_reason"] == "max_steps"
    assert len(run.of_kind("model")) == 2 and run.steps[-1]["kind"] == "verifier"


def test_an_aider_run_cut_by_its_timeout_keeps_the_edits_it_applied_and_its_model_calls(
    cli_el: El, tmp_path: Path
) -> None:
    """Aider applies the first answer's edits, finds the Python file it wrote broken and asks its
    model to fix it; that answer comes after the agent's time is up. The edits it had applied and
    both calls are in the trajectory, and the verifier judges the file it wrote."""
    with ScriptedServer(default=lambda _: Reply(text="Fixed.", delay_sec=300), api_key=SECRET) as server:
        server.add(Reply(text=LINT_BAIT))
        run = run_example(cli_el, tmp_path, "aider", server, agent_timeout=60, AIDER_EDIT_FORMAT="whole")
        calls = len(server.received)
    assert run.trial["error_type"] == "agent_timeout", run.trial
    assert run.trial["reward"] == 1.0, [step["kind"] for step in run.steps]
    assert calls == 2
    first, second = run.of_kind("model")
    assert "hello.txt" in first["text"] and first["usage"]["input_tokens"] > 0
    assert second["text"] == ""
    assert sorted(edit["arguments"]["path"] for edit in run.tool("edit")) == ["broken.py", "hello.txt"]
