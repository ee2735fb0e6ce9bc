"""Trials: reading one attempt (status, reward, phases, logs, artifacts) and invalidating it."""

from pathlib import Path
from typing import cast

from sqlalchemy import select, update

from envloop.core.status import TERMINAL, Phase
from envloop.core.trial import TrialFlag
from envloop.services.context import Context
from envloop.services.errors import NotFoundError, UserError
from envloop.services.jobs import check_status, load_job
from envloop.services.structured import read_structured
from envloop.store.artifacts import ArtifactNotFoundError
from envloop.store.tables import Job, Profile, Trial
from envloop.wire.trials import (
    ARTIFACT_PAGE,
    LOG_FILES,
    LOG_PAGE_BYTES,
    ArtifactInfo,
    ArtifactPage,
    LogPhase,
    TrialView,
)

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = ["ARTIFACT_PAGE", "LOG_FILES", "LOG_PAGE_BYTES", "ArtifactPage", "LogPhase", "TrialView"]


def _view(trial: Trial, profile_ref: str) -> TrialView:
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


def list_trials(
    ctx: Context,
    job_id: str,
    status: str | None = None,
    task: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> list[TrialView]:
    """A job's trials in grid order (profile, task, attempt); `limit`/`offset` page through big jobs."""
    if (limit is not None and limit < 1) or offset < 0:
        raise UserError("limit must be at least 1 and offset at least 0")
    with ctx.store.read() as session:
        load_job(session, ctx.project_id, job_id)
        # The page is chosen on the trials alone, in index order, and only its rows are read whole:
        # sorting every wide row of a big job to skip `offset` of them costs far more.
        grid_order = (Trial.profile_id, Trial.member_position, Trial.attempt)
        page = select(Trial.id).where(Trial.job_id == job_id).order_by(*grid_order)
        if status is not None:
            page = page.where(Trial.status == check_status("trial", status))
        if task is not None:
            page = page.where(Trial.task_name == task)
        if limit is not None or offset:
            page = page.limit(limit).offset(offset)
        chosen = page.subquery()
        query = (
            select(Trial, Profile.name, Profile.version)
            .join(chosen, chosen.c.id == Trial.id)
            .join(Profile, Profile.id == Trial.profile_id)
            .order_by(*grid_order)
        )
        return [_view(t, f"{name}@{version}") for t, name, version in session.execute(query).all()]


def get_trial(ctx: Context, trial_id: str) -> TrialView:
    with ctx.store.read() as session:
        row = session.execute(
            select(Trial, Profile.name, Profile.version, Job.project_id)
            .join(Profile, Profile.id == Trial.profile_id)
            .join(Job, Job.id == Trial.job_id)
            .where(Trial.id == trial_id)
        ).first()
    if row is None or row[3] != ctx.project_id:
        raise NotFoundError(f"unknown trial {trial_id!r}")
    structured = read_structured(ctx, trial_id)
    return _view(row[0], f"{row[1]}@{row[2]}").model_copy(update={"structured": structured})


def log_artifacts(ctx: Context, trial_id: str, phase: str) -> dict[str, str]:
    """The kept files of a phase, stream name → artifact path, for those that exist."""
    get_trial(ctx, trial_id)
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
    get_trial(ctx, trial_id)
    return ctx.artifacts.trial_file(trial_id, path)


def list_artifacts(ctx: Context, trial_id: str) -> list[ArtifactInfo]:
    get_trial(ctx, trial_id)
    return ctx.artifacts.list_trial(trial_id)


def artifact_page(ctx: Context, trial_id: str, offset: int = 0, limit: int = ARTIFACT_PAGE) -> ArtifactPage:
    """Up to `limit` of the trial's kept files from `offset`, sorted by path, and how many there are."""
    if offset < 0 or not 1 <= limit <= ARTIFACT_PAGE:
        raise UserError(f"offset must be at least 0 and limit between 1 and {ARTIFACT_PAGE}")
    get_trial(ctx, trial_id)
    items, total = ctx.artifacts.page_trial(trial_id, offset, limit)
    end = offset + len(items)
    return ArtifactPage(total=total, offset=offset, items=items, next_offset=end if end < total else None)


def invalidate_trial(ctx: Context, trial_id: str, reason: str | None, undo: bool = False) -> TrialView:
    """Keep the record but exclude its reward from every aggregate (or bring it back)."""
    trial = get_trial(ctx, trial_id)
    if not undo and not (reason and reason.strip()):
        raise UserError("invalidating a trial needs a reason (--reason)")
    if not undo and trial.status not in TERMINAL:
        raise UserError(f"trial {trial_id} is {trial.status}; only finished trials can be invalidated")
    with ctx.store.write() as session:
        session.execute(
            update(Trial)
            .where(Trial.id == trial_id)
            .values(invalidated=not undo, invalidated_reason=None if undo else reason)
        )
        session.execute(
            update(Job).where(Job.id == trial.job_id).values(result_version=Job.result_version + 1)
        )
    return get_trial(ctx, trial_id)
