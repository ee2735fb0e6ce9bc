"""Trials: listing a job's trials and invalidating one. Reading one trial (its view, logs and kept
files) is in `trial_reads`, whose functions are re-exported here."""

from sqlalchemy import select, update

from envloop.core.status import TERMINAL
from envloop.services.context import Context
from envloop.services.errors import UserError
from envloop.services.jobs import check_status, load_job
from envloop.services.trial_reads import (
    artifact_file,
    artifact_page,
    get_trial,
    list_artifacts,
    log_artifacts,
    trial_logs,
    trial_row,
    trial_view,
)
from envloop.store.tables import Job, Profile, Trial
from envloop.wire.trials import ARTIFACT_PAGE, LOG_FILES, LOG_PAGE_BYTES, ArtifactPage, LogPhase, TrialView

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = [
    "ARTIFACT_PAGE",
    "LOG_FILES",
    "LOG_PAGE_BYTES",
    "ArtifactPage",
    "LogPhase",
    "TrialView",
    "artifact_file",
    "artifact_page",
    "get_trial",
    "list_artifacts",
    "log_artifacts",
    "trial_logs",
]


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
        return [trial_view(t, f"{name}@{version}") for t, name, version in session.execute(query).all()]


def invalidate_trial(ctx: Context, trial_id: str, reason: str | None, undo: bool = False) -> TrialView:
    """Keep the record but exclude its reward from every aggregate (or bring it back)."""
    trial = trial_row(ctx, trial_id)
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
