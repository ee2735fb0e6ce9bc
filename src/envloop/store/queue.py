"""The trial queue, kept in the store so no process holds state that a crash could lose.

A worker claims pending trials with a lease (owner, token, expiry) and renews it while they run.
Only the holder of a trial's current lease token can record its result, so a result is recorded
exactly once even if a worker that lost its lease (stalled, partitioned) finishes later. A lease
that expires (the worker died) puts the trial back to pending, or cancels it if its job was.
"""

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from envloop.core.status import TERMINAL, JobStatus, rollup_job_status
from envloop.core.trial import TrialOutcome
from envloop.store.db import Store
from envloop.store.tables import Job, Trial

ACTIVE_JOB_STATUSES = ("pending", "running")


@dataclass(frozen=True)
class ClaimedTrial:
    trial_id: str
    job_id: str
    profile_id: str
    task_name: str
    task_digest: str
    attempt: int
    lease_token: int


def refresh_job_status(session: Session, job_id: str) -> JobStatus:
    """Re-derive a job's status from its trials (the roll-up rule lives in core.status)."""
    statuses = session.scalars(select(Trial.status).where(Trial.job_id == job_id).distinct()).all()
    status = rollup_job_status(statuses)
    values: dict[str, object] = {"status": status}
    if status in TERMINAL:
        values["finished_at"] = func.coalesce(Job.finished_at, datetime.now(UTC))
    session.execute(update(Job).where(Job.id == job_id).values(**values))
    return status


def _job_slots(session: Session, limit: int) -> list[tuple[str, int]]:
    """How many trials each active job may start now, fairly: least-running jobs go first."""
    jobs = session.execute(
        select(Job.id, Job.concurrency, Job.created_at)
        .where(Job.status.in_(ACTIVE_JOB_STATUSES), Job.cancel_requested.is_(False))
        .order_by(Job.created_at)
    ).all()
    if not jobs:
        return []
    running = dict(
        session.execute(
            select(Trial.job_id, func.count())
            .where(Trial.status == "running", Trial.job_id.in_([j.id for j in jobs]))
            .group_by(Trial.job_id)
        ).all()
    )
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
    return list(slots.items())


def claim(store: Store, worker_id: str, limit: int, lease_ttl: float) -> list[ClaimedTrial]:
    """Claim up to `limit` pending trials, spread fairly across jobs, honouring job concurrency."""
    if limit <= 0:
        return []
    claimed: list[ClaimedTrial] = []
    now = datetime.now(UTC)
    expires = time.time() + lease_ttl
    with store.write() as session:
        for job_id, count in _job_slots(session, limit):
            # Lock the job row: concurrent claimers on PostgreSQL serialize per job, keeping
            # the concurrency count exact. (SQLite already serializes writers.)
            session.execute(update(Job).where(Job.id == job_id).values(claim_seq=Job.claim_seq + 1))
            rows = session.execute(
                select(
                    Trial.id,
                    Trial.profile_id,
                    Trial.task_name,
                    Trial.task_digest,
                    Trial.attempt,
                    Trial.lease_token,
                )
                .where(Trial.job_id == job_id, Trial.status == "pending")
                .order_by(Trial.attempt, Trial.member_position, Trial.profile_id)
                .limit(count)
                .with_for_update(skip_locked=True)
            ).all()
            if not rows:
                continue
            session.execute(
                update(Trial)
                .where(Trial.id.in_([r.id for r in rows]), Trial.status == "pending")
                .values(
                    status="running",
                    lease_owner=worker_id,
                    lease_token=Trial.lease_token + 1,
                    lease_expires_at=expires,
                    runs=Trial.runs + 1,
                    started_at=func.coalesce(Trial.started_at, now),
                )
            )
            session.execute(
                update(Job).where(Job.id == job_id, Job.status == "pending").values(status="running")
            )
            claimed.extend(
                ClaimedTrial(
                    r.id, job_id, r.profile_id, r.task_name, r.task_digest, r.attempt, r.lease_token + 1
                )
                for r in rows
            )
    return claimed


def renew(store: Store, worker_id: str, held: Iterable[ClaimedTrial], lease_ttl: float) -> set[str]:
    """Extend the leases still held; return the trial ids whose lease this worker has lost."""
    held = list(held)
    if not held:
        return set()
    with store.write() as session:
        session.execute(
            update(Trial)
            .where(
                Trial.lease_owner == worker_id,
                Trial.status == "running",
                Trial.id.in_([c.trial_id for c in held]),
            )
            .values(lease_expires_at=time.time() + lease_ttl)
        )
        current = set(
            session.execute(
                select(Trial.id, Trial.lease_token).where(
                    Trial.id.in_([c.trial_id for c in held]),
                    Trial.status == "running",
                    Trial.lease_owner == worker_id,
                )
            ).all()
        )
    return {c.trial_id for c in held if (c.trial_id, c.lease_token) not in current}


def cancel_requested(store: Store, trial_ids: Iterable[str]) -> set[str]:
    ids = list(trial_ids)
    if not ids:
        return set()
    with store.read() as session:
        return set(
            session.scalars(
                select(Trial.id)
                .join(Job, Job.id == Trial.job_id)
                .where(Trial.id.in_(ids), Job.cancel_requested.is_(True))
            )
        )


def finish(store: Store, trial: ClaimedTrial, outcome: TrialOutcome) -> bool:
    """Record the outcome if this claim still holds the lease. False: someone else owns the trial now."""
    error = outcome.error
    with store.write() as session:
        result = session.execute(
            update(Trial)
            .where(
                Trial.id == trial.trial_id, Trial.status == "running", Trial.lease_token == trial.lease_token
            )
            .values(
                status=outcome.status,
                error_type=error.type if error else None,
                error_message=error.message if error else None,
                exit_code=error.exit_code if error else None,
                reward=outcome.reward,
                reward_note=outcome.reward_note,
                dimensions=outcome.dimensions,
                sandbox=outcome.sandbox,
                sandbox_note=outcome.sandbox_note,
                warnings=outcome.warnings,
                phases=[p.model_dump(mode="json") for p in outcome.phases],
                lease_owner=None,
                lease_expires_at=None,
                finished_at=datetime.now(UTC),
            )
            .execution_options(synchronize_session=False)
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            return False
        refresh_job_status(session, trial.job_id)
    return True


def reap_expired(store: Store) -> int:
    """Trials whose worker stopped renewing go back to pending (or to cancelled, if their job was)."""
    now = time.time()
    with store.write() as session:
        rows = session.execute(
            select(Trial.id, Trial.job_id, Job.cancel_requested)
            .join(Job, Job.id == Trial.job_id)
            .where(Trial.status == "running", Trial.lease_expires_at < now)
            .with_for_update(skip_locked=True, of=Trial)
        ).all()
        for row in rows:
            values: dict[str, object] = {"lease_owner": None, "lease_expires_at": None}
            if row.cancel_requested:
                values.update(
                    status="cancelled",
                    finished_at=datetime.now(UTC),
                    error_message="cancelled; its worker had stopped",
                )
            else:
                values.update(status="pending")
            session.execute(
                update(Trial).where(Trial.id == row.id, Trial.status == "running").values(**values)
            )
        for job_id in {row.job_id for row in rows}:
            refresh_job_status(session, job_id)
    return len(rows)


def request_cancel(store: Store, job_id: str) -> None:
    """Pending trials are cancelled at once (never dispatched); workers stop the running ones."""
    now = datetime.now(UTC)
    with store.write() as session:
        session.execute(update(Job).where(Job.id == job_id).values(cancel_requested=True))
        session.execute(
            update(Trial)
            .where(Trial.job_id == job_id, Trial.status == "pending")
            .values(status="cancelled", finished_at=now)
        )
        refresh_job_status(session, job_id)


def has_open_trials(store: Store) -> bool:
    """Any trial still pending or running anywhere (a dead worker's trial counts until it is reaped)."""
    with store.read() as session:
        found = session.scalar(select(Trial.id).where(Trial.status.in_(("pending", "running"))).limit(1))
    return found is not None


def release(store: Store, held: Iterable[ClaimedTrial]) -> None:
    """A worker that stops hands its trials back at once instead of letting their leases lapse."""
    with store.write() as session:
        for trial in held:
            session.execute(
                update(Trial)
                .where(
                    Trial.id == trial.trial_id,
                    Trial.status == "running",
                    Trial.lease_token == trial.lease_token,
                )
                .values(status="pending", lease_owner=None, lease_expires_at=None)
            )
