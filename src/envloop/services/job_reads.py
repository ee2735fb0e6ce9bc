"""Reading a job: its row, its profiles, its view with trial counts. Every query is a `Query`
(`envloop.store.reads`), so the embedded CLI runs them without SQLAlchemy (`el job get`) and the
server and the write paths run the same ones through their sessions."""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from envloop.core.status import TrialStatus
from envloop.errors import NotFoundError, UserError
from envloop.services.context import Context
from envloop.services.refs import dataset_ref
from envloop.store.reads import Reads, query
from envloop.wire.jobs import JobView, SkippedTask

if TYPE_CHECKING:
    from envloop.store.reads import Statement


class ProfileRow(Protocol):
    """A profile as a job's reads see it (a row of `job_profiles`, or the stored profile itself)."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def params(self) -> dict[str, Any]: ...


@query
def job_by_id() -> "Statement":
    from sqlalchemy import bindparam, select  # noqa: PLC0415 - only when compiled (store.reads)

    from envloop.store.tables import Job  # noqa: PLC0415

    return select(*Job.__table__.columns).where(Job.id == bindparam("job_id"))


@query
def profiles_of_job() -> "Statement":
    from sqlalchemy import bindparam, select  # noqa: PLC0415

    from envloop.store.tables import JobProfile, Profile  # noqa: PLC0415

    return (
        select(Profile.id, Profile.name, Profile.version, Profile.params)
        .join(JobProfile, JobProfile.profile_id == Profile.id)
        .where(JobProfile.job_id == bindparam("job_id"))
        .order_by(JobProfile.position)
    )


@query
def dataset_names() -> "Statement":
    from sqlalchemy import bindparam, select  # noqa: PLC0415

    from envloop.store.tables import Dataset  # noqa: PLC0415

    return select(Dataset.id, Dataset.name, Dataset.version).where(
        Dataset.id.in_(bindparam("ids", expanding=True))
    )


@query
def trial_counts() -> "Statement":
    from sqlalchemy import bindparam, func, select  # noqa: PLC0415

    from envloop.store.tables import Trial  # noqa: PLC0415

    return (
        select(Trial.job_id, Trial.status, func.count())
        .where(Trial.job_id.in_(bindparam("ids", expanding=True)))
        .group_by(Trial.job_id, Trial.status)
    )


@query
def profile_refs() -> "Statement":
    from sqlalchemy import bindparam, select  # noqa: PLC0415

    from envloop.store.tables import JobProfile, Profile  # noqa: PLC0415

    return (
        select(JobProfile.job_id, Profile.name, Profile.version)
        .join(Profile, Profile.id == JobProfile.profile_id)
        .where(JobProfile.job_id.in_(bindparam("ids", expanding=True)))
        .order_by(JobProfile.job_id, JobProfile.position)
    )


def check_status(kind: Literal["job", "trial"], status: str) -> TrialStatus:
    """A status filter must name a real status: a typo would otherwise match nothing, silently."""
    try:
        return TrialStatus(status)
    except ValueError:
        known = ", ".join(TrialStatus)
        raise UserError(f"unknown {kind} status {status!r} (choose from: {known})") from None


def job_row(reads: Reads, project_id: str, job_id: str) -> Any:
    """The job's columns by name (an unknown job, or another project's, is NotFoundError)."""
    job = reads.first(job_by_id, job_id=job_id)
    if job is None or job.project_id != project_id:
        raise NotFoundError(f"unknown job {job_id!r}")
    return job


def job_profiles(reads: Reads, job_id: str) -> list[ProfileRow]:
    """The job's profiles in submission order: id, name, version, params."""
    return list(reads.rows(profiles_of_job, job_id=job_id))


def job_views(reads: Reads, page: Sequence[Any]) -> list[JobView]:
    """Views of a page of jobs (rows or ORM objects) in a fixed number of queries, whatever the
    page's size: datasets, trial counts and profiles are each read for the whole page at once."""
    if not page:
        return []
    ids = [job.id for job in page]
    dataset_refs = {
        row.id: dataset_ref(row.name, row.version)
        for row in reads.rows(dataset_names, ids=list({job.dataset_id for job in page}))
    }
    counts: dict[str, dict[str, int]] = {job_id: {} for job_id in ids}
    for job_id, status, count in reads.rows(trial_counts, ids=ids):
        counts[job_id][status] = count
    refs: dict[str, list[str]] = {job_id: [] for job_id in ids}
    for job_id, name, version in reads.rows(profile_refs, ids=ids):
        refs[job_id].append(f"{name}@{version}")
    return [
        JobView(
            id=job.id,
            status=job.status,
            dataset=dataset_refs[job.dataset_id],
            runner=job.runner,
            profiles=refs[job.id],
            attempts=job.attempts,
            tasks=list(job.tasks),
            concurrency=job.concurrency,
            max_steps=job.max_steps,
            agent_timeout_sec=job.agent_timeout_sec,
            verifier_timeout_sec=job.verifier_timeout_sec,
            agent_setup_timeout_sec=job.agent_setup_timeout_sec,
            environment=job.environment,
            skip_unsupported=job.skip_unsupported,
            verifier_environment=job.verifier_environment,
            skipped=[SkippedTask.model_validate(item) for item in job.skipped or []],
            tags=dict(job.tags),
            name=job.name,
            note=job.note,
            request_id=job.request_id,
            cancel_requested=job.cancel_requested,
            counts={s: counts[job.id].get(s, 0) for s in TrialStatus},
            created_at=job.created_at,
            finished_at=job.finished_at,
        )
        for job in page
    ]


def get_job(ctx: Context, job_id: str) -> JobView:
    with ctx.reads() as reads:
        return job_views(reads, [job_row(reads, ctx.project_id, job_id)])[0]
