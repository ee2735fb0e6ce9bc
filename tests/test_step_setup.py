"""A multi-step task's `steps/<name>/workdir/`: its files are uploaded into the working directory
before the step's agent, and its `setup.sh` runs there as the step's agent user; a failing setup
stops the trial as an `environment_error`, unscored, before the step's agent or verifier."""

from pathlib import Path

import pytest

from envloop.environments.features import task_features
from envloop.tasks.harbor import load_harbor_task
from tests.test_healthcheck import run
from tests.test_multistep import write_steps_task

APP = "${ENVLOOP_APP_DIR:-/app}"
REWARD = '> "${ENVLOOP_LOGS_DIR:-/logs}/verifier/reward.txt"'


def workdir(task: Path, step: str, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = task / "steps" / step / "workdir" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize("mode", ["bwrap", "plain"])
def test_each_step_gets_its_inputs_and_its_setup_before_its_agent(tmp_path: Path, mode: str) -> None:
    check_first = (
        f'[ "$(cat {APP}/data/batch.txt)" = one ] && [ -f {APP}/prepared-one ] '
        f"&& echo 1 {REWARD} || echo 0 {REWARD}\n"
    )
    check_second = (
        f'[ "$(cat {APP}/data/batch.txt)" = two ] && [ "$(cat {APP}/seen)" = "one two" ] '
        f"&& [ ! -e {APP}/setup.sh ] && echo 1 {REWARD} || echo 0 {REWARD}\n"
    )
    task = write_steps_task(
        tmp_path / "batches",
        [
            ("first", check_first, f"printf one > {APP}/seen\n"),
            ("second", check_second, f'printf " two" >> {APP}/seen\n'),
        ],
    )
    workdir(task, "first", {"data/batch.txt": "one", "setup.sh": "touch prepared-one\n"})
    # The second step's upload replaces the first's file; its setup removes itself, as Harbor allows.
    workdir(task, "second", {"data/batch.txt": "two", "setup.sh": 'rm -- "$0"\n'})
    assert task_features(load_harbor_task(task)) == []
    outcome = run(tmp_path, task, mode)
    assert outcome.error is None, outcome.error
    assert outcome.reward == 1.0


def test_setup_runs_as_the_steps_agent_user(tmp_path: Path) -> None:
    task = write_steps_task(
        tmp_path / "users",
        [("first", f'[ "$(cat {APP}/who)" = 0 ] && echo 1 {REWARD} || echo 0 {REWARD}\n', "")],
        extra={"first": '[steps.agent]\nuser = "root"\n'},
    )
    workdir(task, "first", {"setup.sh": "id -u > who\n"})
    assert run(tmp_path, task).reward == 1.0


def test_a_failing_setup_stops_the_trial_unscored_before_the_steps_agent(tmp_path: Path) -> None:
    task = write_steps_task(
        tmp_path / "broken",
        [("first", f"echo 1 {REWARD}\n", ""), ("second", f"echo 1 {REWARD}\n", f"touch {APP}/agent-ran\n")],
    )
    workdir(task, "second", {"setup.sh": "echo cannot prepare >&2; exit 4\n"})
    outcome = run(tmp_path, task)
    assert outcome.reward is None
    assert outcome.error is not None and outcome.error.type == "environment_error"
    assert outcome.error.message == (
        "step 'second': steps/second/workdir/setup.sh exited with code 4 (cannot prepare); "
        "the step did not start"
    )
    assert "multi-step: stopped before step 'second' (steps that ran: first=reward:1)" in outcome.warnings
    assert not (tmp_path / "artifacts" / "steps" / "second" / "verifier").exists()
