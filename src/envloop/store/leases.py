"""A worker's leases on the trials it claimed: renewed while they run, handed back when it stops,
and reaped when their worker stopped renewing or is known to be gone.

Taking a lease (a claim) and recording a result under it are the queue itself
(`envloop.store.queue`); what is here runs beside a worker's main loop, from its upkeep task and as
it stops (`envloop.scheduling.worker`), and any worker's upkeep reaps for everyone. A reaped trial
goes back to pending, or to cancelled if its job was. Why leases work this way, and what each
crash leaves: docs/design/queue-and-leases.md.
"""

import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from sqlalchemy import ColumnElement, select, update

from envloop.core.status import TrialStatus
from envloop.store.db import Store
from envloop.store.queue import ClaimedTrial, refresh_job_status
from envloop.store.retry_aborted import DEADLOCK_SQLSTATES, retry_aborted
from envloop.store.tables import Job, Trial
from envloop.store.tables import Worker as WorkerRow


def renew(store: Store, worker_id: str, held: Iterable[ClaimedTrial], lease_ttl: float) -> set[str]:
    """Extend the leases still held; return the trial ids whose lease this worker has lost."""
    held = list(held)
    if not held:
        return set()
    ids = [c.trial_id for c in held]

    def work() -> set[tuple[str, int]]:
        # The worker renews while it records results in another thread: on PostgreSQL the two
        # transactions can lock the same trial rows in opposite orders, and one is aborted.
        with store.write_connection() as conn:
            conn.execute(
                update(Trial)
                .where(Trial.lease_owner == worker_id, Trial.status == TrialStatus.RUNNING, Trial.id.in_(ids))
                .values(lease_expires_at=time.time() + lease_ttl)
            )
            return {
                (row.id, row.lease_token)
                for row in conn.execute(
                    select(Trial.id, Trial.lease_token).where(
                        Trial.id.in_(ids), Trial.status == TrialStatus.RUNNING, Trial.lease_owner == worker_id
                    )
                )
            }

    # A lock wait that timed out goes to the caller, which waits it out for as long as it takes
    # and says so (the worker's store calls); only an aborted deadlock is run again here.
    current = retry_aborted(work, DEADLOCK_SQLSTATES)
    return {c.trial_id for c in held if (c.trial_id, c.lease_token) not in current}


def reap_expired(store: Store) -> int:
    """Trials whose worker stopped renewing go back to pending (or to cancelled, if their job was)."""
    now = time.time()
    with store.engine.connect() as conn:
        expired = conn.scalar(
            select(Trial.id).where(Trial.status == TrialStatus.RUNNING, Trial.lease_expires_at < now).limit(1)
        )
    if expired is None:  # the common case costs no write lock
        return 0
    return retry_aborted(lambda: _reap(store, Trial.lease_expires_at < now))


WorkerGone = Callable[[str, int, float], bool]
"""Whether a worker (host, pid, start time in epoch seconds) is known to be gone: `liveness.gone`."""


def reap_abandoned(store: Store, is_gone: WorkerGone) -> int:
    """Trials held by a worker known to be gone go back as `reap_expired` sends them, without
    waiting for their leases to expire: a worker killed on this host hands its trials over to the
    next one at once. Workers that cannot be judged from here keep their leases."""
    with store.engine.connect() as conn:
        holders = conn.execute(
            select(WorkerRow.id, WorkerRow.host, WorkerRow.pid, WorkerRow.started_at).where(
                WorkerRow.id.in_(select(Trial.lease_owner).where(Trial.status == TrialStatus.RUNNING))
            )
        ).all()
    dead = [row.id for row in holders if is_gone(row.host, row.pid, row.started_at.timestamp())]
    if not dead:
        return 0
    return retry_aborted(lambda: _reap(store, Trial.lease_owner.in_(dead)))


def _reap(store: Store, which: ColumnElement[bool]) -> int:
    with store.write_connection() as conn:
        rows = conn.execute(
            select(Trial.id, Trial.job_id, Job.cancel_requested)
            .join(Job, Job.id == Trial.job_id)
            .where(Trial.status == TrialStatus.RUNNING, which)
            .with_for_update(skip_locked=True, of=Trial)
        ).all()
        for row in rows:
            values: dict[str, object] = {"lease_owner": None, "lease_expires_at": None}
            if row.cancel_requested:
                values.update(
                    status=TrialStatus.CANCELLED,
                    finished_at=datetime.now(UTC),
                    error_message="cancelled; its worker had stopped",
                )
            else:
                values.update(status=TrialStatus.PENDING)
            conn.execute(
                update(Trial).where(Trial.id == row.id, Trial.status == TrialStatus.RUNNING).values(**values)
            )
        for job_id in {row.job_id for row in rows}:
            refresh_job_status(conn, job_id)
    return len(rows)


def release(store: Store, held: Iterable[ClaimedTrial]) -> None:
    """A worker that stops hands its trials back at once instead of letting their leases lapse."""
    held = list(held)

    def work() -> None:
        with store.write_connection() as conn:
            for trial in held:
                conn.execute(
                    update(Trial)
                    .where(
                        Trial.id == trial.trial_id,
                        Trial.status == TrialStatus.RUNNING,
                        Trial.lease_token == trial.lease_token,
                    )
                    .values(status=TrialStatus.PENDING, lease_owner=None, lease_expires_at=None)
                )

    retry_aborted(work, DEADLOCK_SQLSTATES)
