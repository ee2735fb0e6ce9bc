"""Harbor healthchecks: `[environment.healthcheck]` is probed before the agent starts, and a
`[steps.healthcheck]` before its step's agent, with Docker's rules (start period, interval,
timeout, retries). An environment that never becomes healthy is an `environment_error` naming the
healthcheck, never a score; the agent does not start in it."""

import asyncio
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments import LocalEnvironmentProvider
from envloop.runners import ShellRunner
from envloop.tasks.harbor import load_harbor_task
from envloop.tasks.model import TaskFormatError
from tests.conftest import make_task
from tests.test_multistep import write_steps_task

APP = "${ENVLOOP_APP_DIR:-/app}"
REWARD = '> "${ENVLOOP_LOGS_DIR:-/logs}/verifier/reward.txt"'
# Fails until it has been probed `n` times, then marks the environment ready.
COUNTING = (
    "n=$(cat {app}/.probes 2>/dev/null || echo 0); echo $((n+1)) > {app}/.probes; "
    "[ $n -ge {n} ] && touch {app}/ready"
)
READY_AND_DONE = (
    f"if [ -f {APP}/ready ] && [ -f {APP}/done ]; then echo 1 {REWARD}; else echo 0 {REWARD}; fi\n"
)


def healthcheck(command: str, **fields: float) -> str:
    escaped = command.replace("\\", "\\\\").replace('"', '\\"')
    lines = [f'command = "{escaped}"', *(f"{name} = {value}" for name, value in fields.items())]
    return "[environment.healthcheck]\n" + "\n".join(lines) + "\n"


def run(tmp_path: Path, task: Path, mode: str = "bwrap", agent: str = "oracle") -> TrialOutcome:
    spec = TrialSpec(
        job_id="job_health",
        trial_id=new_id("trl"),
        task_name=task.name,
        attempt=1,
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params={"AGENT_NAME": agent},
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
    )
    return asyncio.run(ShellRunner(LocalEnvironmentProvider(mode)).run(spec))


@pytest.mark.parametrize("mode", ["bwrap", "plain"])
def test_the_agent_starts_once_the_healthcheck_passes(tmp_path: Path, mode: str) -> None:
    toml = healthcheck(COUNTING.format(app=APP, n=2), interval_sec=0.1, retries=3)
    task = make_task(
        tmp_path, "health", solve=f"test -f {APP}/ready && touch {APP}/done", test=READY_AND_DONE, toml=toml
    )
    outcome = run(tmp_path, task, mode)
    assert outcome.error is None, outcome.error
    assert outcome.reward == 1.0
    assert not any("healthcheck" in warning for warning in outcome.warnings)
    setup = (tmp_path / "artifacts" / "setup" / "output.txt").read_text()
    assert "probe 1 failed (exit 1)" in setup and "probe 3 passed" in setup


@pytest.mark.parametrize("mode", ["bwrap", "plain"])
def test_an_environment_that_never_becomes_healthy_is_an_environment_error_not_a_score(
    tmp_path: Path, mode: str
) -> None:
    toml = healthcheck("echo not yet >&2; exit 3", interval_sec=0.05, retries=2)
    task = make_task(tmp_path, "sick", solve=f"touch {APP}/done", toml=toml)
    outcome = run(tmp_path, task, mode)
    assert outcome.reward is None
    assert outcome.error is not None and outcome.error.type == "environment_error"
    assert outcome.error.message.startswith("[environment.healthcheck] never passed")
    assert (
        "failed 2 consecutive probe(s)" in outcome.error.message
        and "exit 3: not yet" in outcome.error.message
    )
    assert [phase.name for phase in outcome.phases] == ["setup", "teardown"]  # no agent, no verifier


def test_failures_in_the_start_period_do_not_count(tmp_path: Path) -> None:
    patient = healthcheck(
        COUNTING.format(app=APP, n=3),
        start_period_sec=5,
        start_interval_sec=0.05,
        interval_sec=0.05,
        retries=1,
    )
    task = make_task(tmp_path / "a", "patient", solve=f"touch {APP}/done", test=READY_AND_DONE, toml=patient)
    assert run(tmp_path / "a", task).reward == 1.0
    hasty = healthcheck(COUNTING.format(app=APP, n=3), interval_sec=0.05, retries=1)
    task = make_task(tmp_path / "b", "hasty", solve=f"touch {APP}/done", toml=hasty)
    outcome = run(tmp_path / "b", task)
    assert outcome.error is not None and "failed 1 consecutive probe(s)" in outcome.error.message


def test_a_probe_is_cut_at_its_timeout(tmp_path: Path) -> None:
    task = make_task(
        tmp_path, "slow", toml=healthcheck("sleep 30", timeout_sec=0.3, interval_sec=0.05, retries=1)
    )
    outcome = run(tmp_path, task)
    assert outcome.error is not None and outcome.error.type == "environment_error"
    assert "timed out after 0.3 s" in outcome.error.message


def test_the_wait_stays_under_the_operators_ceiling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOOP_MAX_TIMEOUT_SEC", "1")
    task = make_task(
        tmp_path, "forever", toml=healthcheck("false", start_period_sec=100000, start_interval_sec=0.2)
    )
    outcome = run(tmp_path, task)
    assert outcome.error is not None
    assert "did not pass within the operator's 1 s ceiling" in outcome.error.message


def test_a_step_healthcheck_runs_before_its_agent_and_stops_the_trial_unscored(tmp_path: Path) -> None:
    task = write_steps_task(
        tmp_path / "steps",
        [
            ("first", f"echo 1 {REWARD}\n", "true\n"),
            ("second", f"echo 1 {REWARD}\n", f"touch {APP}/second\n"),
        ],
        extra={
            "second": '[steps.healthcheck]\ncommand = "test -f /nowhere"\ninterval_sec = 0.05\nretries = 1\n'
        },
    )
    outcome = run(tmp_path, task)
    assert outcome.reward is None
    assert outcome.error is not None and outcome.error.type == "environment_error"
    assert outcome.error.message.startswith("step 'second': [steps.healthcheck] never passed")
    assert "multi-step: stopped before step 'second' (steps that ran: first=reward:1)" in outcome.warnings
    assert not (tmp_path / "artifacts" / "steps" / "second" / "verifier").exists()


def test_a_passing_step_healthcheck_lets_the_step_run(tmp_path: Path) -> None:
    task = write_steps_task(
        tmp_path / "steps",
        [("only", f"test -f {APP}/ready && echo 1 {REWARD} || echo 0 {REWARD}\n", "true\n")],
        extra={"only": f'[steps.healthcheck]\ncommand = "touch {APP}/ready"\n'},
    )
    outcome = run(tmp_path, task)
    assert (outcome.error, outcome.reward) == (None, 1.0)


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ("interval_sec = 1\n", "environment.healthcheck.command"),
        ('command = ""\n', "environment.healthcheck.command"),
        ('command = "true"\nretries = 0\n', "environment.healthcheck.retries"),
        ('command = "true"\ntimeout_sec = -1\n', "environment.healthcheck.timeout_sec"),
        ('command = "true"\nstart_period_sec = inf\n', "environment.healthcheck.start_period_sec"),
    ],
)
def test_a_malformed_healthcheck_is_refused_when_the_task_loads(
    tmp_path: Path, section: str, field: str
) -> None:
    task = make_task(tmp_path, "bad", toml="[environment.healthcheck]\n" + section)
    with pytest.raises(TaskFormatError) as raised:
        load_harbor_task(task)
    assert raised.value.field == field
