"""The trial queue in the store: leases, exactly-once results, fairness, concurrency, cancellation."""

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.exc import DBAPIError

from envloop import liveness
from envloop.core.trial import TrialOutcome
from envloop.services import jobs
from envloop.services.context import Context
from envloop.store import leases, queue
from envloop.store.tables import Trial
from envloop.store.tables import Worker as WorkerRow
from tests.conftest import submit_nop_job
from tests.pg import BACKENDS

pytestmark = pytest.mark.parametrize("store_url", BACKENDS, indirect=True)


def _status(ctx: Context, trial_id: str) -> str:
    with ctx.store.read() as session:
        return session.scalar(select(Trial.status).where(Trial.id == trial_id)) or ""


def test_all_trials_exist_pending_at_submission(ctx: Context, tmp_path: Path) -> None:
    job = jobs.get_job(ctx, submit_nop_job(ctx, tmp_path, tasks=3, attempts=2))
    assert job.counts == {"pending": 6, "running": 0, "completed": 0, "failed": 0, "cancelled": 0}
    assert job.status == "pending"


def test_a_claimed_trial_is_not_claimed_again_while_its_lease_holds(ctx: Context, tmp_path: Path) -> None:
    submit_nop_job(ctx, tmp_path, tasks=2, attempts=1)
    first = queue.claim(ctx.store, "w1", 10, lease_ttl=30)
    assert len(first) == 2
    assert queue.claim(ctx.store, "w2", 10, lease_ttl=30) == []


def test_claims_take_first_attempts_of_every_task_before_second_attempts(
    ctx: Context, tmp_path: Path
) -> None:
    submit_nop_job(ctx, tmp_path, tasks=3, attempts=2)
    claimed = queue.claim(ctx.store, "w1", 3, lease_ttl=30)
    assert sorted((c.task_name, c.attempt) for c in claimed) == [("t0", 1), ("t1", 1), ("t2", 1)]


def test_an_expired_lease_puts_the_trial_back_and_the_old_holder_cannot_record(
    ctx: Context, tmp_path: Path
) -> None:
    submit_nop_job(ctx, tmp_path, tasks=1, attempts=1)
    (stale,) = queue.claim(ctx.store, "dead-worker", 1, lease_ttl=30)
    with ctx.store.write() as session:
        session.execute(update(Trial).values(lease_expires_at=time.time() - 1))
    assert leases.reap_expired(ctx.store) == 1
    assert _status(ctx, stale.trial_id) == "pending"
    (fresh,) = queue.claim(ctx.store, "w2", 1, lease_ttl=30)
    assert fresh.trial_id == stale.trial_id and fresh.lease_token == stale.lease_token + 1
    assert queue.finish(ctx.store, stale, TrialOutcome(status="completed", reward=1.0)) is False
    assert queue.finish(ctx.store, fresh, TrialOutcome(status="completed", reward=0.0)) is True
    assert queue.finish(ctx.store, fresh, TrialOutcome(status="completed", reward=1.0)) is False
    with ctx.store.read() as session:
        trial = session.scalars(select(Trial)).one()
    assert (trial.status, trial.reward, trial.runs) == ("completed", 0.0, 2)


def _spawned_and_reaped() -> int:
    """The pid of a process that has ended and been waited for."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _worker_row(ctx: Context, worker_id: str, host: str, pid: int, started: float) -> None:
    with ctx.store.write() as session:
        session.add(
            WorkerRow(
                id=worker_id,
                host=host,
                pid=pid,
                capacity=1,
                started_at=datetime.fromtimestamp(started, UTC),
                heartbeat_at=time.time(),
            )
        )


def test_a_worker_gone_from_this_host_hands_its_trials_back_before_their_leases_expire(
    ctx: Context, tmp_path: Path
) -> None:
    """Only a worker known to be gone loses its trials early: one whose pid has ended, or whose pid
    now belongs to a later process. A live worker, and one of another host, keep theirs."""
    submit_nop_job(ctx, tmp_path, tasks=5, attempts=1)
    here, me = liveness.this_host(), os.getpid()
    workers = {
        "w-ended": (here, _spawned_and_reaped(), time.time() - 5),
        "w-pid-reused": (here, me, liveness.start_time() - 3600),
        "w-alive": (here, me, liveness.start_time()),
        "w-elsewhere": ("another-host", _spawned_and_reaped(), time.time() - 5),
    }
    held = {}
    for worker_id, (host, pid, started) in workers.items():
        _worker_row(ctx, worker_id, host, pid, started)
        (held[worker_id],) = queue.claim(ctx.store, worker_id, 1, lease_ttl=30)
    (unregistered,) = queue.claim(ctx.store, "w-without-a-row", 1, lease_ttl=30)

    assert leases.reap_abandoned(ctx.store, liveness.gone) == 2
    status = {worker_id: _status(ctx, claimed.trial_id) for worker_id, claimed in held.items()}
    assert status == {
        "w-ended": "pending",
        "w-pid-reused": "pending",
        "w-alive": "running",
        "w-elsewhere": "running",
    }
    assert _status(ctx, unregistered.trial_id) == "running"
    assert queue.finish(ctx.store, held["w-ended"], TrialOutcome(status="completed", reward=1.0)) is False
    assert leases.reap_abandoned(ctx.store, liveness.gone) == 0


def test_cancelling_a_job_whose_worker_died_here_ends_its_running_trial_at_once(
    ctx: Context, tmp_path: Path
) -> None:
    job_id = submit_nop_job(ctx, tmp_path, tasks=1, attempts=1)
    _worker_row(ctx, "w-ended", liveness.this_host(), _spawned_and_reaped(), time.time() - 5)
    (trial,) = queue.claim(ctx.store, "w-ended", 1, lease_ttl=30)
    assert jobs.cancel_job(ctx, job_id).status == "cancelled"
    assert _status(ctx, trial.trial_id) == "cancelled"


def test_renew_reports_leases_that_were_lost(ctx: Context, tmp_path: Path) -> None:
    submit_nop_job(ctx, tmp_path, tasks=2, attempts=1)
    held = queue.claim(ctx.store, "w1", 2, lease_ttl=30)
    with ctx.store.write() as session:
        session.execute(update(Trial).where(Trial.id == held[0].trial_id).values(lease_owner="thief"))
    assert leases.renew(ctx.store, "w1", held, lease_ttl=30) == {held[0].trial_id}


def test_job_concurrency_caps_running_trials_across_claims(ctx: Context, tmp_path: Path) -> None:
    submit_nop_job(ctx, tmp_path, tasks=4, attempts=2, concurrency=3)
    assert len(queue.claim(ctx.store, "w1", 10, lease_ttl=30)) == 3
    assert queue.claim(ctx.store, "w2", 10, lease_ttl=30) == []


def test_capacity_is_shared_fairly_across_jobs(ctx: Context, tmp_path: Path) -> None:
    a = submit_nop_job(ctx, tmp_path, tasks=5, attempts=2)
    b = submit_nop_job(ctx, tmp_path, tasks=5, attempts=2)
    claimed = queue.claim(ctx.store, "w1", 4, lease_ttl=30)
    assert sorted(c.job_id for c in claimed) == sorted([a, a, b, b])


def test_cancel_cancels_pending_trials_at_once_as_never_dispatched(ctx: Context, tmp_path: Path) -> None:
    job_id = submit_nop_job(ctx, tmp_path, tasks=2, attempts=2)
    (running,) = queue.claim(ctx.store, "w1", 1, lease_ttl=30)
    queue.request_cancel(ctx.store, job_id)
    view = jobs.get_job(ctx, job_id)
    assert (view.counts["cancelled"], view.counts["running"], view.status) == (3, 1, "running")
    assert queue.cancel_requested(ctx.store, [running.trial_id]) == {running.trial_id}
    assert queue.claim(ctx.store, "w2", 10, lease_ttl=30) == []
    queue.finish(ctx.store, running, TrialOutcome(status="cancelled"))
    assert jobs.get_job(ctx, job_id).status == "cancelled"


def test_a_dead_workers_trial_in_a_cancelled_job_ends_cancelled(ctx: Context, tmp_path: Path) -> None:
    job_id = submit_nop_job(ctx, tmp_path, tasks=1, attempts=1)
    (trial,) = queue.claim(ctx.store, "dead", 1, lease_ttl=30)
    queue.request_cancel(ctx.store, job_id)
    with ctx.store.write() as session:
        session.execute(update(Trial).values(lease_expires_at=time.time() - 1))
    leases.reap_expired(ctx.store)
    assert _status(ctx, trial.trial_id) == "cancelled"
    assert jobs.get_job(ctx, job_id).status == "cancelled"


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        (["completed", "completed"], "completed"),
        (["completed", "failed"], "failed"),
        (["cancelled", "completed"], "cancelled"),
        (["failed", "cancelled"], "failed"),
    ],
)
def test_job_status_rolls_up_from_its_trials(
    ctx: Context, tmp_path: Path, outcomes: list[str], expected: str
) -> None:
    job_id = submit_nop_job(ctx, tmp_path, tasks=2, attempts=1)
    claimed = queue.claim(ctx.store, "w1", 2, lease_ttl=30)
    queue.finish(ctx.store, claimed[0], TrialOutcome(status=outcomes[0]))  # type: ignore[arg-type]
    assert jobs.get_job(ctx, job_id).status == "running"
    queue.finish(ctx.store, claimed[1], TrialOutcome(status=outcomes[1]))  # type: ignore[arg-type]
    view = jobs.get_job(ctx, job_id)
    assert view.status == expected and view.finished_at is not None


class _Deadlock(Exception):
    sqlstate = "40P01"


def test_renewing_and_handing_back_are_tried_again_after_a_deadlock(
    ctx: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker renews its leases while another of its threads records results: on PostgreSQL the
    two transactions can deadlock, and the one aborted changed nothing, so it is run again rather
    than ending the worker."""
    submit_nop_job(ctx, tmp_path, tasks=2, attempts=1)
    held = queue.claim(ctx.store, "w1", 10, lease_ttl=30)
    real = type(ctx.store).write_connection
    aborted: list[str] = []

    @contextlib.contextmanager
    def once_aborted(store: Any) -> Iterator[Any]:
        if len(aborted) < 2:
            aborted.append("deadlock")
            raise DBAPIError("UPDATE trials …", {}, _Deadlock())
        with real(store) as conn:
            yield conn

    monkeypatch.setattr(type(ctx.store), "write_connection", once_aborted)
    assert leases.renew(ctx.store, "w1", held, lease_ttl=60) == set()
    leases.release(ctx.store, held)
    assert aborted == ["deadlock", "deadlock"]
    assert {_status(ctx, c.trial_id) for c in held} == {"pending"}
