"""The trial queue, kept in the store so no process holds state that a crash could lose.

A worker claims pending trials with a lease (owner, token, expiry) and renews it while they run.
Only the holder of a trial's current lease token can record its result, so a result is recorded
exactly once even if a worker that lost its lease (stalled, partitioned) finishes later. A lease
that expires (the worker died) puts the trial back to pending, or cancels it if its job was.

These are Core statements on a plain connection: a worker records and claims in one short write
transaction per wake-up, and the ORM's bookkeeping would cost more than the database work. The
ones `settle` runs every time are compiled once and run on the driver's cursor, where SQLAlchemy's
execution would cost several times the database work (`envloop.store.cursor_statements`).
Here: claiming and recording (`settle`), re-deriving a job's status, cancelling a job. Renewing,
handing back and reaping leases is `envloop.store.leases`; a write that PostgreSQL aborted is run
again by `envloop.store.retry_aborted`. Why the queue is built this way, and what each crash
leaves: docs/design/queue-and-leases.md.
"""

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from sqlalchemy import Connection, bindparam, func, literal, select, update

from envloop.core.status import OPEN, TERMINAL, JobStatus, TrialStatus, rollup_job_status
from envloop.core.trial import TrialOutcome
from envloop.store.cursor_statements import CursorStatement
from envloop.store.db import Store
from envloop.store.retry_aborted import retry_aborted
from envloop.store.tables import Job, Trial

# The hot-path statements are built once: building a statement costs more than running it.
# The open statuses are separate binds, not one expanding list: the SQL is then the same at every
# execution, so it is compiled once and run on the driver's cursor (`store.cursor_statements`).
_TRIAL_IS_OPEN = Trial.status.in_([literal(status, Trial.status.type) for status in OPEN])
_JOB_IS_OPEN = Job.status.in_([literal(status, Job.status.type) for status in OPEN])
_OPEN_TRIAL_OF_JOB = CursorStatement(
    select(Trial.id).where(Trial.job_id == bindparam("job_id"), _TRIAL_IS_OPEN).limit(1)
)
_ACTIVE_JOBS = CursorStatement(
    select(Job.id, Job.concurrency, Job.status)
    .where(_JOB_IS_OPEN, Job.cancel_requested.is_(False))
    .order_by(Job.created_at)
)
_RUNNING_PER_JOB = (
    select(Trial.job_id, func.count())
    .where(Trial.status == TrialStatus.RUNNING, Trial.job_id.in_(bindparam("job_ids", expanding=True)))
    .group_by(Trial.job_id)
)
_PENDING_OF_JOB = CursorStatement(
    select(Trial.id, Trial.profile_id, Trial.task_name, Trial.task_digest, Trial.attempt, Trial.lease_token)
    .where(Trial.job_id == bindparam("job_id"), Trial.status == TrialStatus.PENDING)
    .order_by(Trial.attempt, Trial.member_position, Trial.profile_id)
    .limit(bindparam("count"))
    .with_for_update(skip_locked=True)
)
# The claimed trials are still pending (they were read under the same write lock), and the update
# says so again. Written as a plain equality beside a list of ids, that guard let SQLite's planner
# (which has no statistics) answer it from the status index, walking every pending trial of every
# job, ~2 ms per claim with 100,000 pending; as an expression no index serves, it can never be
# chosen over the key. The update runs once per claimed id (in one call to the driver), so its SQL
# is the same at every claim.
_STILL_PENDING = func.coalesce(Trial.status, "") == TrialStatus.PENDING
_START = CursorStatement(
    update(Trial)
    .where(Trial.id == bindparam("id"), _STILL_PENDING)
    .values(
        status=TrialStatus.RUNNING,
        lease_owner=bindparam("owner"),
        lease_token=Trial.lease_token + 1,
        lease_expires_at=bindparam("expires"),
        runs=Trial.runs + 1,
        started_at=func.coalesce(Trial.started_at, bindparam("now")),
    )
)
_JOB_STARTED = CursorStatement(
    update(Job)
    .where(Job.id == bindparam("job_id"), Job.status == JobStatus.PENDING)
    .values(status=JobStatus.RUNNING)
)
_LOCK_JOB = update(Job).where(Job.id == bindparam("job_id")).values(claim_seq=Job.claim_seq + 1)
_LOCK_JOB_ROW = CursorStatement(select(Job.id).where(Job.id == bindparam("job_id")).with_for_update())
_RUNNING_OF_JOB = select(func.count()).where(
    Trial.job_id == bindparam("job_id"), Trial.status == TrialStatus.RUNNING
)
_RESULT_COLUMNS = (
    "status", "error_type", "error_message", "exit_code", "reward", "reward_note", "dimensions",
    "sandbox", "sandbox_note", "warnings", "phases", "usage", "stop_reason", "structured_result",
    "flags", "destinations", "finished_at",
)  # fmt: skip
_FINISH = CursorStatement(
    update(Trial)
    .where(
        Trial.id == bindparam("trial_id"),
        Trial.status == TrialStatus.RUNNING,
        Trial.lease_token == bindparam("token"),
    )
    .values(
        lease_owner=None,
        lease_expires_at=None,
        **{name: bindparam(f"new_{name}", type_=Trial.__table__.c[name].type) for name in _RESULT_COLUMNS},
    )
)


class _ActiveJob(NamedTuple):
    """A row of _ACTIVE_JOBS, by name."""

    id: str
    concurrency: int | None
    status: JobStatus


@dataclass(frozen=True)
class ClaimedTrial:
    trial_id: str
    job_id: str
    profile_id: str
    task_name: str
    task_digest: str
    attempt: int
    lease_token: int


def refresh_job_status(conn: Connection, job_id: str) -> JobStatus | None:
    """Re-derive a job's status from its trials (the roll-up rule lives in core.status).

    While any trial is still pending or running the job stays as it is (claims mark it running),
    so the per-trial cost is one indexed existence check; the full roll-up runs once at the end.
    On PostgreSQL the job row is locked first: two workers finishing a job's last two trials at
    once would otherwise each still see the other's trial running, and neither would roll up.
    """
    if conn.dialect.name != "sqlite":  # SQLite already runs one writer at a time
        _LOCK_JOB_ROW.rows(conn, job_id=job_id)
    if _OPEN_TRIAL_OF_JOB.rows(conn, job_id=job_id):
        return None
    statuses = conn.scalars(select(Trial.status).where(Trial.job_id == job_id).distinct()).all()
    status = rollup_job_status(statuses)
    values: dict[str, object] = {"status": status}
    if status in TERMINAL:
        values["finished_at"] = func.coalesce(Job.finished_at, datetime.now(UTC))
    conn.execute(update(Job).where(Job.id == job_id).values(**values))
    return status


def _job_slots(conn: Connection, limit: int) -> list[tuple[str, int, int | None, bool]]:
    """(job, how many trials it may start now, its concurrency limit, still pending) — fairly:
    jobs with the fewest running trials are served first, one slot at a time."""
    jobs = [_ActiveJob(*row) for row in _ACTIVE_JOBS.rows(conn)]
    if not jobs:
        return []
    if len(jobs) == 1 and not jobs[0].concurrency:  # nothing to share or cap: no need to count
        return [(jobs[0].id, limit, None, jobs[0].status == JobStatus.PENDING)]
    running: dict[str, int] = dict(conn.execute(_RUNNING_PER_JOB, {"job_ids": [j.id for j in jobs]}).all())
    room = {j.id: (j.concurrency - running.get(j.id, 0)) if j.concurrency else limit for j in jobs}
    order = sorted((j for j in jobs if room[j.id] > 0), key=lambda j: running.get(j.id, 0))
    slots: dict[str, int] = {}
    remaining = limit
    while remaining > 0 and order:
        for job in list(order):
            if remaining == 0:
                break
            slots[job.id] = slots.get(job.id, 0) + 1
            remaining -= 1
            if slots[job.id] >= room[job.id]:
                order.remove(job)
    return [(j.id, slots[j.id], j.concurrency, j.status == JobStatus.PENDING) for j in jobs if j.id in slots]


def _claim(conn: Connection, worker_id: str, limit: int, lease_ttl: float) -> list[ClaimedTrial]:
    claimed: list[ClaimedTrial] = []
    now = datetime.now(UTC)
    expires = time.time() + lease_ttl
    serialized = conn.dialect.name == "sqlite"  # SQLite already runs one writer at a time
    for job_id, slots, concurrency, pending in _job_slots(conn, limit):
        count = slots
        if concurrency and not serialized:
            # Lock the job row so concurrent claimers on PostgreSQL keep the concurrency count exact,
            # and count again under the lock: the first count may predate another claimer's commit.
            conn.execute(_LOCK_JOB, {"job_id": job_id})
            count = min(slots, concurrency - (conn.scalar(_RUNNING_OF_JOB, {"job_id": job_id}) or 0))
            if count <= 0:
                continue
        rows = _PENDING_OF_JOB.rows(conn, job_id=job_id, count=count)
        if not rows:
            continue
        _START.run_each(
            conn, [{"id": row[0], "owner": worker_id, "expires": expires, "now": now} for row in rows]
        )
        if pending:
            _JOB_STARTED.rowcount(conn, job_id=job_id)
        claimed.extend(
            ClaimedTrial(trial_id, job_id, profile_id, task_name, task_digest, attempt, token + 1)
            for trial_id, profile_id, task_name, task_digest, attempt, token in rows
        )
    return claimed


def _finish(conn: Connection, trial: ClaimedTrial, outcome: TrialOutcome) -> bool:
    error = outcome.error
    values = {
        "status": outcome.status,
        "error_type": error.type if error else None,
        "error_message": error.message if error else None,
        "exit_code": error.exit_code if error else None,
        "reward": outcome.reward,
        "reward_note": outcome.reward_note,
        "dimensions": outcome.dimensions,
        "sandbox": outcome.sandbox,
        "sandbox_note": outcome.sandbox_note,
        "warnings": outcome.warnings,
        "phases": [p.model_dump(mode="json") for p in outcome.phases],
        "usage": outcome.usage,
        "stop_reason": outcome.stop_reason,
        "structured_result": outcome.structured_result,
        "flags": [flag.model_dump(mode="json") for flag in outcome.flags],
        "destinations": outcome.destinations and outcome.destinations.model_dump(mode="json"),
        "finished_at": datetime.now(UTC),
    }
    params = {f"new_{name}": value for name, value in values.items()}
    if _FINISH.rowcount(conn, trial_id=trial.trial_id, token=trial.lease_token, **params) != 1:
        return False
    refresh_job_status(conn, trial.job_id)
    return True


def settle(
    store: Store,
    worker_id: str,
    finished: Sequence[tuple[ClaimedTrial, TrialOutcome]],
    want: int,
    lease_ttl: float,
) -> tuple[list[bool], list[ClaimedTrial]]:
    """Record finished trials and claim up to `want` new ones, in one write transaction.

    Returns, per finished trial, whether its result was recorded (False: the lease was lost and
    someone else owns the trial now), and the newly claimed trials.
    """
    if not finished and want <= 0:
        return [], []

    def work() -> tuple[list[bool], list[ClaimedTrial]]:
        with store.write_connection() as conn:
            recorded = [_finish(conn, trial, outcome) for trial, outcome in finished]
            claimed = _claim(conn, worker_id, want, lease_ttl) if want > 0 else []
        return recorded, claimed

    return retry_aborted(work)


def claim(store: Store, worker_id: str, limit: int, lease_ttl: float) -> list[ClaimedTrial]:
    """Claim up to `limit` pending trials, spread fairly across jobs, honouring job concurrency."""
    return settle(store, worker_id, [], limit, lease_ttl)[1]


def finish(store: Store, trial: ClaimedTrial, outcome: TrialOutcome) -> bool:
    """Record the outcome if this claim still holds the lease. False: someone else owns the trial now."""
    return settle(store, "", [(trial, outcome)], 0, 0.0)[0][0]


def request_cancel(store: Store, job_id: str) -> None:
    """Pending trials are cancelled at once (never dispatched); workers stop the running ones."""
    now = datetime.now(UTC)

    def work() -> None:
        with store.write_connection() as conn:
            conn.execute(update(Job).where(Job.id == job_id).values(cancel_requested=True))
            conn.execute(
                update(Trial)
                .where(Trial.job_id == job_id, Trial.status == TrialStatus.PENDING)
                .values(status=TrialStatus.CANCELLED, finished_at=now)
            )
            refresh_job_status(conn, job_id)

    retry_aborted(work)


def cancel_requested(store: Store, trial_ids: Iterable[str]) -> set[str]:
    """The trials among `trial_ids` whose job was cancelled: their worker stops them."""
    ids = list(trial_ids)
    if not ids:
        return set()
    with store.engine.connect() as conn:
        return set(
            conn.scalars(
                select(Trial.id)
                .join(Job, Job.id == Trial.job_id)
                .where(Trial.id.in_(ids), Job.cancel_requested.is_(True))
            )
        )


def has_open_trials(store: Store) -> bool:
    """Any trial still pending or running anywhere (a dead worker's trial counts until it is reaped)."""
    with store.engine.connect() as conn:
        found = conn.scalar(select(Trial.id).where(Trial.status.in_(OPEN)).limit(1))
    return found is not None
