"""The shell runner's agents (`oracle`, `nop`, `command`) as a trial sees them."""

import asyncio
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments import LocalEnvironmentProvider
from envloop.environments.local.bwrap import bwrap_executable
from envloop.runners import ShellRunner
from tests.conftest import captured

HAS_BWRAP = bwrap_executable()[0] is not None
needs_bwrap = pytest.mark.skipif(not HAS_BWRAP, reason="bwrap cannot create a sandbox on this host")
MODES = ["plain", pytest.param("bwrap", marks=needs_bwrap)]
SECRET = "sk-test-9f8e7d6c5b4a"


def write_task(root: Path, *, instruction: str = "Say hello.\n", solution: bool = True) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "task.toml").write_text('version = "1.0"\n')
    (root / "instruction.md").write_text(instruction)
    (root / "tests" / "test.sh").write_text('echo 1 > "${ENVLOOP_LOGS_DIR:-/logs}/verifier/reward.txt"\n')
    if solution:
        (root / "solution").mkdir()
        (root / "solution" / "solve.sh").write_text("echo solving\n")
    return root


def run_command(tmp_path: Path, mode: str, command: str, **spec_fields: object) -> TrialOutcome:
    task = write_task(tmp_path / "agent-task")
    spec = TrialSpec(
        job_id="job_agents",
        trial_id=new_id("trl"),
        task_name="agent-task",
        attempt=spec_fields.pop("attempt", 1),
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params={"AGENT_NAME": "command", "AGENT_COMMAND": command, "HF_TOKEN": SECRET},
        secret_values=(SECRET,),
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
        **spec_fields,
    )
    runner = ShellRunner(LocalEnvironmentProvider(mode))  # type: ignore[arg-type]
    return asyncio.run(runner.run(spec))


def agent_stdout(tmp_path: Path) -> str:
    return captured(tmp_path / "artifacts" / "agent" / "stdout.txt")


@pytest.mark.parametrize("mode", MODES)
def test_command_agent_sees_its_attempt_task_instruction_and_max_steps(tmp_path: Path, mode: str) -> None:
    command = (
        'echo "$ENVLOOP_ATTEMPT|$ENVLOOP_TASK|$ENVLOOP_JOB_ID|$ENVLOOP_MAX_STEPS"; '
        'echo "$ENVLOOP_INSTRUCTION"; cat "$ENVLOOP_INSTRUCTION_FILE"'
    )
    outcome = run_command(tmp_path, mode, command, attempt=2, max_steps=5)
    assert outcome.status == "completed", outcome.error
    assert agent_stdout(tmp_path).splitlines() == [
        "2|agent-task|job_agents|5",
        "Say hello.",
        "",
        "Say hello.",
    ]


@pytest.mark.parametrize("mode", MODES)
def test_agent_cannot_read_the_tests_during_its_phase(tmp_path: Path, mode: str) -> None:
    command = (
        'cat "$ENVLOOP_TESTS_DIR/test.sh" && echo READ-TESTS; ls "${ENVLOOP_TESTS_DIR}" || echo no-tests'
    )
    run_command(tmp_path, mode, command)
    out = agent_stdout(tmp_path)
    assert "READ-TESTS" not in out
    assert "no-tests" in out


@needs_bwrap
def test_agent_cannot_see_the_hosts_root_home_or_work_tree(tmp_path: Path) -> None:
    command = (
        f'for p in /root /work /tests /solution {tmp_path}; do test -e "$p" && echo "sees $p"; done; true'
    )
    outcome = run_command(tmp_path, "bwrap", command)
    assert outcome.status == "completed"
    assert agent_stdout(tmp_path) == ""


@pytest.mark.parametrize("mode", MODES)
def test_secret_values_are_masked_in_every_kept_artifact(tmp_path: Path, mode: str) -> None:
    command = (
        'echo "key=$HF_TOKEN"; echo "$HF_TOKEN" >&2; '
        'mkdir -p "$ENVLOOP_LOGS_DIR/agent/deep"; '
        'printf "%s" "$HF_TOKEN" > "$ENVLOOP_LOGS_DIR/agent/deep/k.bin"'
    )
    outcome = run_command(tmp_path, mode, command)
    assert outcome.status == "completed"
    kept = [p for p in (tmp_path / "artifacts").rglob("*") if p.is_file()]
    assert {p.name for p in kept} >= {"stdout.txt", "stderr.txt", "k.bin", "reward.txt"}
    assert all(SECRET.encode() not in p.read_bytes() for p in kept)
    assert agent_stdout(tmp_path) == "key=***\n"
    assert (tmp_path / "artifacts" / "agent" / "deep" / "k.bin").read_bytes() == b"***"


def test_symlinks_in_the_logs_are_never_followed_into_the_host(tmp_path: Path) -> None:
    outside = tmp_path / "host-secret.txt"
    outside.write_text("host only")
    command = (
        f'ln -s "{outside}" "$ENVLOOP_LOGS_DIR/agent/stolen.txt"; ln -s / "$ENVLOOP_LOGS_DIR/agent/root"'
    )
    run_command(tmp_path, "plain", command)
    kept = {p.name for p in (tmp_path / "artifacts").rglob("*")}
    assert "stolen.txt" not in kept
    assert "root" not in kept


def test_oracle_without_a_solution_is_an_agent_error_and_no_verifier_judges_it(tmp_path: Path) -> None:
    task = write_task(tmp_path / "unsolvable", solution=False)
    spec = TrialSpec(
        job_id="job_agents",
        trial_id=new_id("trl"),
        task_name="unsolvable",
        attempt=1,
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params={"AGENT_NAME": "oracle"},
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
    )
    outcome = asyncio.run(ShellRunner(LocalEnvironmentProvider("plain")).run(spec))
    assert outcome.status == "failed"
    assert outcome.error is not None
    assert (outcome.error.type, outcome.error.message) == ("agent_error", "task has no solution/solve.sh")
    # The verifier would pass an untouched workspace here; the oracle never worked, so it is unscored.
    assert outcome.reward is None and "never worked on the task" in (outcome.reward_note or "")
    assert [phase.name for phase in outcome.phases] == ["setup", "agent", "artifacts", "teardown"]


def test_a_long_instruction_is_passed_only_as_a_file(tmp_path: Path) -> None:
    task = write_task(tmp_path / "long-task", instruction="x" * 70_000)
    spec = TrialSpec(
        job_id="job_agents",
        trial_id=new_id("trl"),
        task_name="long-task",
        attempt=1,
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params={
            "AGENT_NAME": "command",
            "AGENT_COMMAND": 'echo "${ENVLOOP_INSTRUCTION:-unset}"; wc -c < "$ENVLOOP_INSTRUCTION_FILE"',
        },
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
    )
    asyncio.run(ShellRunner(LocalEnvironmentProvider("plain")).run(spec))
    assert agent_stdout(tmp_path).split() == ["unset", "70000"]
