"""What `envloop/shell@1` records for agents without model steps (`oracle`, `command`, `nop`): the
instruction, each command with its result and working-directory changes, the verifier's run; and
the `NETWORK` param that gives an agent phase a network of its own."""

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from envloop.core.ids import new_id
from envloop.core.trajectory import StateStep, ToolStep, Trajectory, UserStep, VerifierStep
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments import LocalEnvironmentProvider
from envloop.environments.local import bwrap
from envloop.environments.local.bwrap import bwrap_executable
from envloop.runners import ShellRunner
from envloop.runners.params import check_params, unread_params
from envloop.services import datasets
from envloop.services.context import Context
from envloop.testing import ScriptedServer
from envloop.trajectories import read_trajectory
from envloop.wire.jobs import JobRequest
from tests.conftest import El, captured, make_task, publish_profile, run_job_in_process

SECRET = "sk-shell-trajectory-0a1b2c"
HAS_BWRAP = bwrap_executable()[0] is not None
needs_bwrap = pytest.mark.skipif(not HAS_BWRAP, reason="bwrap cannot create a sandbox on this host")
MODES = ["plain", pytest.param("bwrap", marks=needs_bwrap)]


def run(tmp_path: Path, params: dict[str, str], mode: str = "plain", **fields: Any) -> TrialOutcome:
    task = fields.pop("task", None) or make_task(
        tmp_path / "tasks", "edit", solve="echo new > notes.txt; rm old.txt; touch done; echo solved"
    )
    if not (task / "environment" / "old.txt").exists():
        (task / "environment" / "old.txt").write_text("old\n")
        (task / "environment" / "notes.txt").write_text("first\n")
        (task / "environment" / "Dockerfile").write_text(
            "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY old.txt notes.txt /app/\n"
        )
    spec = TrialSpec(
        job_id="job_traj",
        trial_id=new_id("trl"),
        task_name=task.name,
        attempt=1,
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params=params,
        secret_values=(SECRET,),
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
        **fields,
    )
    runner = ShellRunner(LocalEnvironmentProvider(mode))  # type: ignore[arg-type]
    return asyncio.run(runner.run(spec))


def outcome_trial(step: ToolStep) -> str:
    """The trial directory a plain-mode command ran in (its paths are the instance's own)."""
    assert step.command is not None
    return step.command.split("/instances/")[1].split("/")[0]


def kept(tmp_path: Path) -> Trajectory:
    return read_trajectory(tmp_path / "artifacts" / "trajectory.json")


@pytest.mark.parametrize("mode", MODES)
def test_the_oracle_is_one_command_step_with_its_changes_then_the_verifier(tmp_path: Path, mode: str) -> None:
    outcome = run(tmp_path, {"AGENT_NAME": "oracle"}, mode)
    assert outcome.status == "completed" and outcome.reward == 1.0
    assert (outcome.stop_reason, outcome.usage) == (None, {})
    trajectory = kept(tmp_path)
    assert (trajectory.agent, trajectory.runner, trajectory.stop_reason) == (
        "oracle",
        "envloop/shell@1",
        None,
    )
    user, command, verifier = trajectory.steps
    assert isinstance(user, UserStep) and user.text == "Do the edit thing.\n"
    assert isinstance(command, ToolStep)
    solution = "/solution" if mode == "bwrap" else str(tmp_path / "instances")
    assert command.command is not None and command.command.startswith(f"bash {solution}")
    assert (command.tool, command.exit_code, command.stdout) == ("oracle", 0, "solved\n")
    changes = {c.path: c for c in command.changes}
    assert {p: c.change for p, c in changes.items()} == {
        "done": "created",
        "notes.txt": "modified",
        "old.txt": "deleted",
    }
    assert changes["notes.txt"].diff is not None and "-first\n+new\n" in changes["notes.txt"].diff
    assert isinstance(verifier, VerifierStep)
    tests = "/tests" if mode == "bwrap" else f"{solution}/{outcome_trial(command)}/tests"
    assert (verifier.reward, verifier.exit_code, verifier.command) == (1.0, 0, f"bash {tests}/test.sh")
    assert verifier.duration_ms is not None


def test_a_command_agent_step_keeps_its_output_whole_and_secrets_masked(tmp_path: Path) -> None:
    command = f'seq 1 50000; echo "{SECRET}" >&2; echo {SECRET} > leaked.txt; exit 4'
    outcome = run(tmp_path, {"AGENT_NAME": "command", "AGENT_COMMAND": command, "MODEL_API_KEY": SECRET})
    assert outcome.error is not None and outcome.error.exit_code == 4
    _, step, verifier = kept(tmp_path).steps
    assert isinstance(step, ToolStep) and step.tool == "command"
    assert step.command == f"bash -c '{command}'".replace(SECRET, "***")
    assert step.stdout == "".join(f"{n}\n" for n in range(1, 50001))
    assert (step.stderr, step.exit_code) == ("***\n", 4)
    [leak] = step.changes
    assert leak.path == "leaked.txt" and leak.diff is not None and "+***" in leak.diff
    assert isinstance(verifier, VerifierStep) and verifier.reward == 0.0
    assert SECRET not in (tmp_path / "artifacts" / "trajectory.json").read_text()


def test_nop_is_a_state_step_saying_nothing_ran(tmp_path: Path) -> None:
    run(tmp_path, {"AGENT_NAME": "nop"})
    _, state, verifier = kept(tmp_path).steps
    assert isinstance(state, StateStep) and (state.note, state.changes) == ("nop ran no command", [])
    assert isinstance(verifier, VerifierStep) and verifier.reward == 0.0


def test_a_command_cut_off_by_the_agent_timeout_is_recorded_as_interrupted(tmp_path: Path) -> None:
    command = "touch started; sleep 60"
    outcome = run(tmp_path, {"AGENT_NAME": "command", "AGENT_COMMAND": command}, agent_timeout_sec=1)
    assert outcome.error is not None and outcome.error.type == "agent_timeout"
    trajectory = kept(tmp_path)
    assert trajectory.stop_reason == "timeout"
    step = trajectory.steps[1]
    assert isinstance(step, ToolStep) and step.error is not None and "interrupted" in step.error
    assert [c.path for c in step.changes] == ["started"]


def test_a_verifier_without_a_reward_is_recorded_with_the_reason(tmp_path: Path) -> None:
    task = make_task(tmp_path / "tasks", "silent", test="echo checking; exit 2")
    run(tmp_path, {"AGENT_NAME": "nop"}, task=task)
    verifier = kept(tmp_path).steps[-1]
    assert isinstance(verifier, VerifierStep)
    assert (verifier.reward, verifier.exit_code, verifier.stdout) == (None, 2, "checking\n")
    assert verifier.reward_note is not None


@needs_bwrap
def test_network_public_opens_a_network_of_its_own_and_no_service_of_the_host(tmp_path: Path) -> None:
    """Not even the model endpoint's port: an agent reaches its model through the gateway alone
    (tests/test_model_route.py)."""
    with ScriptedServer() as endpoint, ScriptedServer() as other:
        probe = (
            f"exec 3<>/dev/tcp/127.0.0.1/{endpoint.port} && echo reached; "
            f"exec 4<>/dev/tcp/127.0.0.1/{other.port} && echo other reached; true"
        )
        params = {"AGENT_NAME": "command", "AGENT_COMMAND": probe}
        offline = run(tmp_path / "none", params, "bwrap")
        online = run(tmp_path / "host", {**params, "NETWORK": "public"}, "bwrap")
    for path in (tmp_path / "none", tmp_path / "host"):
        assert "reached" not in captured(path / "artifacts" / "agent" / "stdout.txt")
    assert "network: agent public, verifier no-network" in (online.sandbox_note or "")
    assert "network: agent no-network, verifier no-network" in (offline.sandbox_note or "")


def test_an_unknown_network_setting_is_refused() -> None:
    assert check_params(ShellRunner(), {"AGENT_NAME": "nop", "NETWORK": "bridge"}) == [
        "NETWORK must be one of none, public, host, not 'bridge'"
    ]
    assert unread_params(ShellRunner(), {"AGENT_NAME": "nop", "NETWORK": "host"}).names == []


def test_el_trial_get_steps_prints_the_trajectory(el: El, ctx: Context, tmp_path: Path) -> None:
    make_task(tmp_path / "tasks", "hello", solve="echo hi > done; echo solving")
    dataset = datasets.push_dataset(ctx, tmp_path / "tasks", "traj").ref
    profile = publish_profile(ctx, tmp_path / "p.json", "team/oracle", {"AGENT_NAME": "oracle"})
    job = run_job_in_process(ctx, JobRequest(dataset=dataset, profiles=[profile]))
    [trial] = el.ok("trial", "list", "--job", job, "--json").json()
    text = el.ok("trial", "get", trial["id"], "--steps").stdout
    assert "#0 user" in text and "Do the hello thing." in text
    assert "#1 tool" in text and "oracle [oracle_1]  exit 0" in text and "stdout: solving" in text
    assert "created done (3 bytes)" in text and "+hi" in text
    assert "#2 verifier" in text and "reward 1  exit 0" in text
    data = el.ok("trial", "get", trial["id"], "--steps", "--json").json()
    assert [s["kind"] for s in data["trajectory"]["steps"]] == ["user", "tool", "verifier"]
    assert json.dumps(data).count("solving") >= 1


@needs_bwrap
def test_a_network_pasta_cannot_give_is_an_environment_error_naming_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tun device the trial's uid cannot open would end every networked command at once, read as
    the agent failing; the trial is an environment_error that names the device instead."""
    device = tmp_path / "tun"
    device.write_text("")
    device.chmod(0o600)
    monkeypatch.setattr(bwrap, "TUN_DEVICE", str(device))
    bwrap.pasta_executable.cache_clear()
    try:
        params = {"AGENT_NAME": "command", "AGENT_COMMAND": "echo ran", "NETWORK": "host"}
        params["MODEL_BASE_URL"] = "http://127.0.0.1:9/v1"
        outcome = run(tmp_path / "trial", params, "bwrap")
    finally:
        bwrap.pasta_executable.cache_clear()
    assert outcome.error is not None and outcome.error.type == "environment_error", outcome.error
    assert "tun" in outcome.error.message and "mode 600" in outcome.error.message
    assert outcome.reward is None
