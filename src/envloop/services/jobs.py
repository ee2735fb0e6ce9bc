"""Jobs: listing, following, cancelling and exporting them, and `load_job`, the row of the
project's job that the other job services start from.

Submitting a job (checking the request, creating the job and its trials) is
`envloop.services.job_submission`; a job's view with its trial counts is `envloop.services.job_reads`.
"""

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from envloop.core.status import TrialStatus
from envloop.errors import NotFoundError, UserError
from envloop.services.context import Context
from envloop.services.datasets import dataset_members
from envloop.services.job_reads import check_status, get_job, job_profiles, job_views
from envloop.store import leases, queue
from envloop.store.reads import SessionReads
from envloop.store.tables import Job, Trial
from envloop.wire.jobs import MAX_PAGE, JobProgress, JobRequest, JobView

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = [
    "MAX_PAGE",
    "JobProgress",
    "JobRequest",
    "JobView",
    "get_job",
    "job_profiles",
    "job_views",
]


def load_job(session: Session, project_id: str, job_id: str) -> Job:
    job = session.get(Job, job_id)
    if job is None or job.project_id != project_id:
        raise NotFoundError(f"unknown job {job_id!r}")
    return job


def job_progress(ctx: Context, job_id: str) -> JobProgress:
    """One query: the job's status and its trials counted by status (what a follower needs)."""
    query = (
        select(Job.status, Job.cancel_requested, Trial.status.label("trial_status"), func.count(Trial.id))
        .select_from(Job)
        .outerjoin(Trial, Trial.job_id == Job.id)
        .where(Job.id == job_id, Job.project_id == ctx.project_id)
        .group_by(Job.status, Job.cancel_requested, Trial.status)
    )
    with ctx.store.read() as session:
        rows = session.execute(query).all()
    if not rows:
        raise NotFoundError(f"unknown job {job_id!r}")
    counts = {row.trial_status: row[3] for row in rows if row.trial_status is not None}
    return JobProgress(
        id=job_id,
        status=rows[0].status,
        cancel_requested=rows[0].cancel_requested,
        counts={s: counts.get(s, 0) for s in TrialStatus},
    )


def list_jobs(
    ctx: Context,
    status: str | None = None,
    tags: dict[str, str] | None = None,
    limit: int = 50,
    before: str | None = None,
) -> list[JobView]:
    """One page of jobs, newest first: filtered (status, every tag), ordered and cut in the database,
    so a page costs the same few queries however long the project's history. The next page is the
    one `before` the last job of this one."""
    if not 1 <= limit <= MAX_PAGE:
        raise UserError(f"limit {limit}: expected 1 to {MAX_PAGE}")
    query = select(Job).where(Job.project_id == ctx.project_id)
    if status is not None:
        query = query.where(Job.status == check_status("job", status))
    for key, value in (tags or {}).items():
        query = query.where(Job.tags[key].as_string() == value)
    with ctx.store.read() as session:
        if before is not None:
            cursor = session.execute(
                select(Job.created_at, Job.id).where(Job.id == before, Job.project_id == ctx.project_id)
            ).first()
            if cursor is None:
                raise NotFoundError(f"unknown job {before!r} (--before)")
            query = query.where(
                or_(
                    Job.created_at < cursor.created_at,
                    and_(Job.created_at == cursor.created_at, Job.id < cursor.id),
                )
            )
        page = list(session.scalars(query.order_by(Job.created_at.desc(), Job.id.desc()).limit(limit)))
        return job_views(SessionReads(session), page)


def cancel_job(ctx: Context, job_id: str) -> JobView:
    """Pending trials end at once, running ones when their worker stops them; those of a worker
    that died on this host end now too (nobody else would stop them before their leases expired)."""
    from envloop.liveness import gone  # noqa: PLC0415 - psutil, not for every importer of this module

    with ctx.store.read() as session:
        load_job(session, ctx.project_id, job_id)
    queue.request_cancel(ctx.store, job_id)
    leases.reap_abandoned(ctx.store, gone)
    return get_job(ctx, job_id)


def export_job(ctx: Context, job_id: str) -> JobRequest:
    """The job's configuration, reproducible with `el job submit --config`; never secret values."""
    with ctx.store.read() as session:
        job = load_job(session, ctx.project_id, job_id)
        view = job_views(SessionReads(session), [job])[0]
        all_members = [m.name for m in dataset_members(session, job.dataset_id)]
    chosen = set(view.tasks) | {item.task for item in view.skipped}
    return JobRequest(
        dataset=view.dataset,
        profiles=view.profiles,
        attempts=view.attempts,
        tasks=None if chosen == set(all_members) else [m for m in all_members if m in chosen],
        max_steps=view.max_steps,
        concurrency=view.concurrency,
        agent_timeout_sec=view.agent_timeout_sec,
        verifier_timeout_sec=view.verifier_timeout_sec,
        agent_setup_timeout_sec=view.agent_setup_timeout_sec,
        environment=view.environment,
        skip_unsupported=view.skip_unsupported,
        verifier_environment=view.verifier_environment,
        tags=view.tags,
        name=view.name,
        note=view.note,
    )
