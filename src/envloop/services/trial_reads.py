"""Reading trials (a job's list, one trial's view, logs and kept files) with `Query` reads
(`envloop.store.reads`), so the embedded CLI (`el trial list`, `get`, `logs`, `artifacts`) runs them
without SQLAlchemy, and the server runs the same ones through its sessions."""

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from envloop.core.destinations import Destinations
from envloop.core.status import Phase
from envloop.core.trial import TrialFlag
from envloop.errors import NotFoundError, UserError
from envloop.services.context import Context
from envloop.services.structured import read_structured
from envloop.store.artifacts import ArtifactNotFoundError
from envloop.store.reads import query
from envloop.wire.trials import (
    ARTIFACT_PAGE,
    LOG_FILES,
    LOG_PAGE_BYTES,
    ArtifactInfo,
    ArtifactPage,
    LogPhase,
    TrialView,
)

if TYPE_CHECKING:
    from envloop.store.reads import Statement


@query
def trial_by_id() -> "Statement":
    from sqlalchemy import bindparam, select  # noqa: PLC0415 - only when compiled (store.reads)

    from envloop.store.tables import Job, Profile, Trial  # noqa: PLC0415

    return (
        select(
            *Trial.__table__.columns,
            Profile.name.label("profile_name"),
            Profile.version.label("profile_version"),
            Job.project_id.label("project_id"),
        )
        .join(Profile, Profile.id == Trial.profile_id)
        .join(Job, Job.id == Trial.job_id)
        .where(Trial.id == bindparam("trial_id"))
    )


NO_LIMIT = 2**62
"""The page size of an unpaged list: the statement always has its LIMIT, so one statement serves
every call, paged or not."""


@query
def trial_page() -> "Statement":
    """A job's trials in grid order (profile, task, attempt), optionally of one status or task, one
    page of them. The page is chosen on the trials alone, in index order, and only its rows are read
    whole: sorting every wide row of a big job to skip `offset` of them costs far more. A filter left
    None compares the column with itself (`coalesce`), which keeps it one statement."""
    from sqlalchemy import String, bindparam, func, select  # noqa: PLC0415

    from envloop.store.tables import Profile, Trial  # noqa: PLC0415

    grid_order = (Trial.profile_id, Trial.member_position, Trial.attempt)
    chosen = (
        select(Trial.id)
        .where(
            Trial.job_id == bindparam("job_id"),
            Trial.status == func.coalesce(bindparam("status", type_=Trial.status.type), Trial.status),
            Trial.task_name == func.coalesce(bindparam("task", type_=String), Trial.task_name),
        )
        .order_by(*grid_order)
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
        .subquery()
    )
    listed = [column for column in Trial.__table__.columns if column.name != "destinations"]  # one trial's
    return (
        select(
            *listed,
            Profile.name.label("profile_name"),
            Profile.version.label("profile_version"),
        )
        .join(chosen, chosen.c.id == Trial.id)
        .join(Profile, Profile.id == Trial.profile_id)
        .order_by(*grid_order)
    )


def list_trials(
    ctx: Context,
    job_id: str,
    status: str | None = None,
    task: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> list[TrialView]:
    """A job's trials in grid order (profile, task, attempt); `limit`/`offset` page through big jobs."""
    # The job's reads (and their wire models) load for a list, not for one trial's view or logs.
    from envloop.services.job_reads import check_status, job_row  # noqa: PLC0415

    if (limit is not None and limit < 1) or offset < 0:
        raise UserError("limit must be at least 1 and offset at least 0")
    wanted = None if status is None else check_status("trial", status).value
    with ctx.reads() as reads:
        job_row(reads, ctx.project_id, job_id)
        rows = reads.rows(
            trial_page,
            job_id=job_id,
            status=wanted,
            task=task,
            limit=NO_LIMIT if limit is None else limit,
            offset=offset,
        )
    return [trial_view(row, f"{row.profile_name}@{row.profile_version}") for row in rows]


def trial_view(trial: Any, profile_ref: str) -> TrialView:
    """A trial's view from its row (a `Trial`, or a row of its columns)."""
    return TrialView(
        id=trial.id,
        job_id=trial.job_id,
        profile=profile_ref,
        task=trial.task_name,
        task_digest=trial.task_digest,
        attempt=trial.attempt,
        status=trial.status,
        error_type=trial.error_type,
        error_message=trial.error_message,
        exit_code=trial.exit_code,
        reward=trial.reward,
        reward_note=trial.reward_note,
        dimensions=dict(trial.dimensions),
        invalidated=trial.invalidated,
        invalidated_reason=trial.invalidated_reason,
        sandbox=trial.sandbox,
        sandbox_note=trial.sandbox_note,
        warnings=list(trial.warnings),
        phases=list(trial.phases),
        runs=trial.runs,
        flags=[TrialFlag.model_validate(flag) for flag in trial.flags or []],
        created_at=trial.created_at,
        started_at=trial.started_at,
        finished_at=trial.finished_at,
    )


def trial_row(ctx: Context, trial_id: str) -> Any:
    """The trial's row (its columns, profile name and version), or NotFoundError when it is not the
    project's: what a read that only needs to know the trial, its job or its status asks, without
    reading its structured result from the artifacts as `get_trial` does."""
    with ctx.reads() as reads:
        row = reads.first(trial_by_id, trial_id=trial_id)
    if row is None or row.project_id != ctx.project_id:
        raise NotFoundError(f"unknown trial {trial_id!r}")
    return row


def get_trial(ctx: Context, trial_id: str) -> TrialView:
    row = trial_row(ctx, trial_id)
    structured = read_structured(ctx, trial_id)
    destinations = None if row.destinations is None else Destinations.model_validate(row.destinations)
    return trial_view(row, f"{row.profile_name}@{row.profile_version}").model_copy(
        update={"structured": structured, "destinations": destinations}
    )


def log_artifacts(ctx: Context, trial_id: str, phase: str) -> dict[str, str]:
    """The kept files of a phase, stream name → artifact path, for those that exist."""
    trial_row(ctx, trial_id)
    try:
        files = LOG_FILES[cast(LogPhase, Phase(phase))]
    except (ValueError, KeyError):
        raise UserError(f"unknown phase {phase!r} (choose from: {', '.join(LOG_FILES)})") from None
    kept = {}
    for rel in files:
        try:
            ctx.artifacts.trial_file(trial_id, rel)
        except ArtifactNotFoundError:
            continue
        kept[Path(rel).stem] = rel
    return kept


def trial_logs(
    ctx: Context, trial_id: str, phase: str = Phase.AGENT, offset: int = 0, limit: int = LOG_PAGE_BYTES
) -> dict[str, str]:
    """Up to `limit` bytes (at most LOG_PAGE_BYTES) of each stream of a phase, from byte `offset`
    (secrets were masked when they were kept). A stream that ends before `offset` reads as ""."""
    if offset < 0 or not 1 <= limit <= LOG_PAGE_BYTES:
        raise UserError(f"offset must be at least 0 and limit between 1 and {LOG_PAGE_BYTES}")
    logs: dict[str, str] = {}
    for stream, rel in log_artifacts(ctx, trial_id, phase).items():
        with ctx.artifacts.trial_file(trial_id, rel).open("rb") as handle:
            handle.seek(offset)
            logs[stream] = handle.read(limit).decode("utf-8", errors="replace")
    return logs


def artifact_file(ctx: Context, trial_id: str, path: str) -> Path:
    """A kept file of the trial, by its path within it (as the artifact list gives it)."""
    trial_row(ctx, trial_id)
    return ctx.artifacts.trial_file(trial_id, path)


def list_artifacts(ctx: Context, trial_id: str) -> list[ArtifactInfo]:
    trial_row(ctx, trial_id)
    return ctx.artifacts.list_trial(trial_id)


def artifact_page(ctx: Context, trial_id: str, offset: int = 0, limit: int = ARTIFACT_PAGE) -> ArtifactPage:
    """Up to `limit` of the trial's kept files from `offset`, sorted by path, and how many there are."""
    if offset < 0 or not 1 <= limit <= ARTIFACT_PAGE:
        raise UserError(f"offset must be at least 0 and limit between 1 and {ARTIFACT_PAGE}")
    trial_row(ctx, trial_id)
    items, total = ctx.artifacts.page_trial(trial_id, offset, limit)
    end = offset + len(items)
    return ArtifactPage(total=total, offset=offset, items=items, next_offset=end if end < total else None)
