"""`envloop/shell@1` end to end: real tasks on disk, real sandboxes, real agents and verifiers."""

import asyncio
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments import LocalEnvironmentProvider
from envloop.environments.local.bwrap import bwrap_executable
from envloop.environments.local.instance import instances_under
from envloop.environments.procs import marked_pids
from envloop.runners import ShellRunner

FIXTURES = Path(__file__).parent / "fixtures"
ANSWER_TASK = FIXTURES / "runner" / "answer-file"
HELLO_WORLD = FIXTURES / "tasks" / "harbor-hello-world"
HAS_BWRAP = bwrap_executable()[0] is not None
needs_bwrap = pytest.mark.skipif(not HAS_BWRAP, reason="bwrap cannot create a sandbox on this host")
MODES = ["plain", pytest.param("bwrap", marks=needs_bwrap)]
LOGS = '"${ENVLOOP_LOGS_DIR:-/logs}"'


def write_task(root: Path, test_sh: str, *, solve_sh: str | None = None, toml: str = "") -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "task.toml").write_text('version = "1.0"\n' + toml)
    (root / "instruction.md").write_text("Solve the task.\n")
    (root / "tests" / "test.sh").write_text(test_sh)
    if solve_sh is not None:
        (root / "solution").mkdir()
        (root / "solution" / "solve.sh").write_text(solve_sh)
    return root


def spec_for(tmp_path: Path, task_dir: Path, params: dict[str, str], **extra: object) -> TrialSpec:
    return TrialSpec(
        job_id="job_run",
        trial_id=new_id("trl"),
        task_name=task_dir.name,
        attempt=extra.pop("attempt", 1),
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params=params,
        task_dir=task_dir,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
        **extra,
    )


def run(mode: str, spec: TrialSpec) -> TrialOutcome:
    runner = ShellRunner(LocalEnvironmentProvider(mode))  # type: ignore[arg-type]
    return asyncio.run(runner.run(spec))


def phase_names(outcome: TrialOutcome) -> list[str]:
    return [p.name for p in outcome.phases]


@pytest.mark.parametrize("mode", MODES)
def test_oracle_solves_the_task_and_scores_one(tmp_path: Path, mode: str) -> None:
    outcome = run(mode, spec_for(tmp_path, ANSWER_TASK, {"AGENT_NAME": "oracle"}))
    assert outcome.status == "completed", outcome.error
    assert outcome.reward == 1.0
    assert outcome.sandbox == mode
    assert phase_names(outcome) == ["setup", "agent", "verifier", "artifacts", "teardown"]
    assert outcome.warnings[-1:] == [
        "environment/Dockerfile: 1 RUN instruction not executed in the local environment"
    ]
    assert any("ENVLOOP_SANDBOX=plain" in w for w in outcome.warnings) == (mode == "plain")
    assert (tmp_path / "artifacts" / "verifier" / "reward.txt").read_text() == "1\n"
    assert instances_under(tmp_path / "instances") == []


@pytest.mark.parametrize("mode", MODES)
def test_nop_leaves_the_task_unsolved_and_scores_zero(tmp_path: Path, mode: str) -> None:
    outcome = run(mode, spec_for(tmp_path, ANSWER_TASK, {"AGENT_NAME": "nop"}))
    assert outcome.status == "completed"
    assert outcome.reward == 0.0


@needs_bwrap
def test_an_unmodified_harbor_task_scores_one_with_the_oracle_in_bwrap(tmp_path: Path) -> None:
    outcome = run("bwrap", spec_for(tmp_path, HELLO_WORLD, {"AGENT_NAME": "oracle"}))
    assert outcome.status == "completed", outcome.error
    assert outcome.reward == 1.0
    assert "network: agent no-network, verifier no-network" in (outcome.sandbox_note or "")


@pytest.mark.parametrize("mode", MODES)
def test_missing_reward_stays_missing_with_a_note(tmp_path: Path, mode: str) -> None:
    task = write_task(tmp_path / "silent", "echo checked\n")
    outcome = run(mode, spec_for(tmp_path, task, {"AGENT_NAME": "nop"}))
    assert outcome.status == "completed"
    assert outcome.reward is None
    assert outcome.reward_note == "the verifier wrote neither reward.txt nor reward.json"


@pytest.mark.parametrize("mode", MODES)
def test_fractional_reward_is_kept_as_is(tmp_path: Path, mode: str) -> None:
    task = write_task(tmp_path / "partial", f"echo 0.25 > {LOGS}/verifier/reward.txt\n")
    outcome = run(mode, spec_for(tmp_path, task, {"AGENT_NAME": "nop"}))
    assert outcome.reward == 0.25


def test_reward_json_with_several_keys_keeps_dimensions_but_no_primary_reward(tmp_path: Path) -> None:
    test_sh = f'echo \'{{"accuracy": 0.5, "speed": 2}}\' > {LOGS}/verifier/reward.json\n'
    task = write_task(tmp_path / "dims", test_sh)
    outcome = run("plain", spec_for(tmp_path, task, {"AGENT_NAME": "nop"}))
    assert outcome.status == "completed"
    assert outcome.reward is None
    assert outcome.dimensions == {"accuracy": 0.5, "speed": 2.0}
    assert "no 'reward' key" in (outcome.reward_note or "")


@pytest.mark.parametrize("mode", MODES)
def test_agent_timeout_still_runs_the_verifier_and_keeps_its_reward(tmp_path: Path, mode: str) -> None:
    task = write_task(tmp_path / "slow-agent", f"echo 1 > {LOGS}/verifier/reward.txt\n")
    params = {"AGENT_NAME": "command", "AGENT_COMMAND": "sleep 30"}
    outcome = run(mode, spec_for(tmp_path, task, params, agent_timeout_sec=0.5))
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error.type == "agent_timeout"
    assert outcome.reward == 1.0
    agent, verifier = outcome.phases[1], outcome.phases[2]
    assert (agent.name, agent.timed_out) == ("agent", True)
    assert (verifier.name, verifier.exit_code) == ("verifier", 0)


def test_verifier_timeout_is_its_own_error(tmp_path: Path) -> None:
    task = write_task(tmp_path / "slow-verifier", "sleep 30\n", toml="[verifier]\ntimeout_sec = 0.5\n")
    outcome = run("plain", spec_for(tmp_path, task, {"AGENT_NAME": "nop"}))
    assert outcome.error is not None and outcome.error.type == "verifier_timeout"
    assert outcome.phases[2].timed_out


def test_verifier_failure_without_reward_is_a_verifier_error(tmp_path: Path) -> None:
    task = write_task(tmp_path / "broken-verifier", "exit 3\n")
    outcome = run("plain", spec_for(tmp_path, task, {"AGENT_NAME": "nop"}))
    assert outcome.status == "failed"
    assert outcome.error is not None
    assert (outcome.error.type, outcome.error.exit_code) == ("verifier_error", 3)


def test_verifier_failure_with_a_reward_is_a_scored_completion(tmp_path: Path) -> None:
    task = write_task(tmp_path / "strict-verifier", f"echo 0 > {LOGS}/verifier/reward.txt; exit 1\n")
    outcome = run("plain", spec_for(tmp_path, task, {"AGENT_NAME": "nop"}))
    assert (outcome.status, outcome.reward) == ("completed", 0.0)


def test_agent_failure_keeps_the_verifiers_reward(tmp_path: Path) -> None:
    task = write_task(tmp_path / "agent-fails", f"echo 1 > {LOGS}/verifier/reward.txt\n")
    params = {"AGENT_NAME": "command", "AGENT_COMMAND": "exit 7"}
    outcome = run("plain", spec_for(tmp_path, task, params))
    assert outcome.status == "failed"
    assert outcome.error is not None
    assert (outcome.error.type, outcome.error.exit_code) == ("agent_error", 7)
    assert outcome.reward == 1.0


def test_a_reward_planted_by_the_agent_is_discarded(tmp_path: Path) -> None:
    task = write_task(tmp_path / "planted", "echo no reward written\n")
    params = {"AGENT_NAME": "command", "AGENT_COMMAND": f"echo 1 > {LOGS}/verifier/reward.txt"}
    outcome = run("plain", spec_for(tmp_path, task, params))
    assert outcome.status == "completed"
    assert outcome.reward is None


def test_unloadable_task_is_an_environment_error(tmp_path: Path) -> None:
    task = tmp_path / "not-a-task"
    task.mkdir()
    outcome = run("plain", spec_for(tmp_path, task, {"AGENT_NAME": "nop"}))
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error.type == "environment_error"
    assert phase_names(outcome) == ["setup"]


def test_a_bad_workdir_is_an_environment_error(tmp_path: Path) -> None:
    task = write_task(tmp_path / "bad-workdir", "true\n", toml='[environment]\nworkdir = "/usr"\n')
    outcome = run("plain", spec_for(tmp_path, task, {"AGENT_NAME": "nop"}))
    assert outcome.error is not None and outcome.error.type == "environment_error"
    assert "workdir '/usr' cannot be used" in outcome.error.message


def test_an_agent_this_worker_lacks_fails_as_infrastructure_without_touching_the_task(tmp_path: Path) -> None:
    outcome = run("plain", spec_for(tmp_path, ANSWER_TASK, {"AGENT_NAME": "wizard"}))
    # Submission found the agent, so it is this worker that lacks it: not the attempt's fault.
    assert outcome.error is not None and outcome.error.type == "infrastructure_error"
    known = (
        "aider, claude-code, codex, command, envloop, gemini-cli, mini-swe-agent, nop, opencode, oracle, "
        "qwen-code, terminus-2"
    )
    assert outcome.error.message == (
        f"unknown agent 'wizard' (known: {known}), on this worker "
        "(install the plugin on every worker, then run the trial again)"
    )
    assert outcome.reward is None


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_cancelling_mid_agent_leaves_no_process_and_no_instance(tmp_path: Path, mode: str) -> None:
    task = write_task(tmp_path / "cancelled", "echo 1 > /dev/null\n")
    command = "setsid nohup sleep 1000 >/dev/null 2>&1 & nohup sleep 1000 >/dev/null 2>&1 & sleep 1000"
    spec = spec_for(tmp_path, task, {"AGENT_NAME": "command", "AGENT_COMMAND": command})
    runner = ShellRunner(LocalEnvironmentProvider(mode))  # type: ignore[arg-type]

    async def main() -> None:
        trial = asyncio.create_task(runner.run(spec))
        while len(marked_pids(spec.trial_id, "ENVLOOP_TRIAL_ID")) < 3:
            await asyncio.sleep(0.02)
        trial.cancel()
        with pytest.raises(asyncio.CancelledError):
            await trial

    asyncio.run(main())
    assert marked_pids(spec.trial_id, "ENVLOOP_TRIAL_ID") == []
    assert instances_under(tmp_path / "instances") == []
