"""Trials: invalidating one. Reading trials (a job's list, one trial's view, logs and kept files) is
in `trial_reads`, whose functions are re-exported here."""

from sqlalchemy import update

from envloop.core.status import TERMINAL
from envloop.errors import UserError
from envloop.services.context import Context
from envloop.services.trial_reads import (
    artifact_file,
    artifact_page,
    get_trial,
    list_artifacts,
    list_trials,
    log_artifacts,
    trial_logs,
    trial_row,
)
from envloop.store.tables import Job, Trial
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
    "list_trials",
    "log_artifacts",
    "trial_logs",
]


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
