"""How many trials the worker `el job submit` starts runs at once is the user's choice."""

import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from envloop.services.context import open_context
from envloop.store.tables import Job, Trial
from envloop.store.tables import Worker as WorkerRow
from tests.conftest import El, make_task, write_profile


def _slow_dataset(el: El, tmp_path: Path, tasks: int) -> None:
    """Trials that sleep far longer than a loaded machine needs to start every worker process: each
    test cancels its job once it has seen what it waits for, so the sleep costs nothing when all is well."""
    root = tmp_path / "tasks"
    for number in range(tasks):
        make_task(root, f"t{number}")
    el.ok("dataset", "push", str(root), "--name", "slow")
    profile = write_profile(tmp_path / "p.json", {"AGENT_NAME": "command", "AGENT_COMMAND": "sleep 120"})
    el.ok("profile", "create", "sleeper", "1", "--file", str(profile))


def _most_running_and_capacity(
    el: El, home: Path, job_id: str, expected: int, timeout: float = 240.0
) -> tuple[int, set[int]]:
    """The most trials seen running at once, and the total capacities of the workers (all processes
    of the started worker) seen, until `expected` trials run together or the timeout; the job is then
    cancelled. The timeout only bounds a loaded machine's slow start (beside the other test processes)."""
    ctx = open_context(home)
    most, capacities = 0, set()
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and most < expected:
            with ctx.store.read() as session:
                running = session.scalar(
                    select(func.count()).where(Trial.job_id == job_id, Trial.status == "running")
                )
                total = session.scalar(select(func.sum(WorkerRow.capacity)))
                capacities |= {total} if total else set()
                status = session.scalar(select(Job.status).where(Job.id == job_id))
            most = max(most, running or 0)
            if status in ("completed", "failed", "cancelled"):
                break
            time.sleep(0.1)
    finally:
        ctx.close()
        el.ok("job", "cancel", job_id)
    return most, capacities


@pytest.mark.slow
@pytest.mark.parametrize("how", ["flag", "environment"])
def test_the_started_worker_runs_as_many_trials_at_once_as_asked(
    el: El, home: Path, tmp_path: Path, how: str
) -> None:
    """Three at once on this 2-core machine, where the default would be two."""
    _slow_dataset(el, tmp_path, tasks=4)
    args = ["job", "submit", "--dataset", "slow@1", "--profile", "sleeper@1", "--json"]
    if how == "flag":
        submitted = el(*args, "--capacity", "3")
    else:
        submitted = el(*args, env={"ENVLOOP_WORKER_CAPACITY": "3"})
    assert submitted.code == 0, submitted.stderr
    most, capacities = _most_running_and_capacity(el, home, submitted.json()["id"], expected=3)
    assert capacities == {3}
    assert most == 3


@pytest.mark.slow
def test_a_job_concurrency_above_the_default_capacity_is_reachable(
    el: El, home: Path, tmp_path: Path
) -> None:
    _slow_dataset(el, tmp_path, tasks=4)
    submitted = el(
        "job", "submit", "--dataset", "slow@1", "--profile", "sleeper@1", "--concurrency", "4", "--json"
    )
    assert submitted.code == 0, submitted.stderr
    most, capacities = _most_running_and_capacity(el, home, submitted.json()["id"], expected=4)
    # On 2 cores that worker is two processes of two (registering one after the other).
    assert max(capacities) == 4 and most == 4


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--capacity", "0"], {}),
        (["--capacity", "-3"], {}),
        (["--capacity", "many"], {}),
        ([], {"ENVLOOP_WORKER_CAPACITY": "0"}),
        ([], {"ENVLOOP_WORKER_CAPACITY": "lots"}),
    ],
)
def test_a_capacity_that_is_not_a_positive_integer_is_refused_before_anything_is_created(
    el: El, home: Path, tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    _slow_dataset(el, tmp_path, tasks=1)
    refused = el("job", "submit", "--dataset", "slow@1", "--profile", "sleeper@1", *args, env=env)
    assert refused.code == 2
    assert "--capacity" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    listed = el.ok("job", "list", "--json").json()
    assert listed == []
    assert not (home / "background-worker.lock").exists()  # no worker was started either


@pytest.mark.parametrize("value", ["0", "x"])
def test_el_worker_refuses_a_bad_capacity_from_the_environment(el: El, value: str) -> None:
    refused = el("worker", "--idle-exit", "0.1", env={"ENVLOOP_WORKER_CAPACITY": value})
    assert refused.code == 2 and "--capacity" in refused.stderr
