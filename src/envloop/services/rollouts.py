"""Rollouts (one trial of one task with one profile, outside a batch) and the progress feed that
streams job and trial status changes to whoever follows them.

A rollout is an ordinary one-trial job, so it is queued, run, scored, listed and shared like any
other; its job carries the tag `rollout=true`.
"""

from datetime import UTC, datetime, timedelta

from sqlalchemy import or_, select

from envloop.core.status import TERMINAL, TrialStatus
from envloop.services.context import Context
from envloop.services.job_submission import JobRequest, submit_job
from envloop.services.jobs import JobView, get_job
from envloop.services.trace import load_outline, step_page
from envloop.services.trial_reads import trial_row
from envloop.services.trials import get_trial, list_trials
from envloop.store.tables import Profile, Trial
from envloop.wire.rollouts import JobEvent, ProgressEvent, RolloutRequest, RolloutView, TrialEvent

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = ["JobEvent", "ProgressEvent", "RolloutRequest", "RolloutView", "TrialEvent"]

ROLLOUT_TAG = "rollout"
_FINISH_OVERLAP = timedelta(seconds=5)
"""Finish times are taken before the result commits (and on the worker's clock): a feed looks back
this far so a trial committed just after the previous poll is still seen."""


def start_rollout(ctx: Context, request: RolloutRequest) -> RolloutView:
    """Queue one attempt now; validated exactly like a job submission (it is one)."""
    submitted = submit_job(
        ctx,
        JobRequest(
            dataset=request.dataset,
            profiles=[request.profile],
            attempts=1,
            tasks=[request.task],
            max_steps=request.max_steps,
            agent_timeout_sec=request.agent_timeout_sec,
            verifier_timeout_sec=request.verifier_timeout_sec,
            agent_setup_timeout_sec=request.agent_setup_timeout_sec,
            tags={**request.tags, ROLLOUT_TAG: "true"},
            request_id=request.request_id,
        ),
    )
    (trial,) = list_trials(ctx, submitted.job.id)
    return RolloutView(job_id=submitted.job.id, trial=trial, warnings=submitted.warnings)


def get_rollout(ctx: Context, trial_id: str) -> RolloutView:
    trial = get_trial(ctx, trial_id)
    if load_outline(ctx, trial_id, checked=True) is None:
        return RolloutView(job_id=trial.job_id, trial=trial)
    page = step_page(ctx, trial_id)
    return RolloutView(
        job_id=trial.job_id,
        trial=trial,
        trajectory=page.trajectory.model_copy(update={"steps": page.steps}),
        steps_total=page.total,
        steps_next_offset=page.next_offset,
    )


def watch_job(ctx: Context, job_id: str) -> "ProgressFeed":
    """Job and trial status changes as they happen, until the job ends."""
    return ProgressFeed(ctx, job_id)


def watch_rollout(ctx: Context, trial_id: str) -> "ProgressFeed":
    """The rollout's status changes as they happen, until it ends."""
    return ProgressFeed(ctx, trial_row(ctx, trial_id).job_id)


class ProgressFeed:
    """Status changes of one job and its trials, one `poll()` at a time.

    The first poll reports the job and its running trials; later polls report what changed: the
    job's status or counts, trials that started, and trials that finished. Each poll reads only the
    running trials, those that finished lately and those seen running before, never the whole job.
    """

    def __init__(self, ctx: Context, job_id: str) -> None:
        self._ctx = ctx
        self.job_id = job_id
        self._job_state: tuple[object, ...] | None = None
        self._trials: dict[str, tuple[object, ...]] = {}
        self._running: set[str] = set()
        self._since = datetime.now(UTC)
        self.job = get_job(ctx, job_id)

    @property
    def finished(self) -> bool:
        return self.job.status in TERMINAL

    @property
    def outcome(self) -> JobView:
        """The job as last polled: what ends its event stream."""
        return self.job

    def poll(self) -> list[ProgressEvent]:
        started = datetime.now(UTC)
        job = get_job(self._ctx, self.job_id)
        events: list[ProgressEvent] = []
        for trial in self._changed_trials():
            state = (trial.status, trial.reward, trial.invalidated)
            if self._trials.get(trial.id) != state:
                self._trials[trial.id] = state
                events.append(trial)
            if trial.status == TrialStatus.RUNNING:
                self._running.add(trial.id)
            else:
                self._running.discard(trial.id)
        job_state = (job.status, tuple(job.counts.values()), job.cancel_requested)
        if job_state != self._job_state:
            self._job_state = job_state
            events.append(JobEvent(job=job))
        self.job = job
        self._since = started
        return events

    def _changed_trials(self) -> list[TrialEvent]:
        query = (
            select(
                Trial.id,
                Trial.task_name,
                Trial.attempt,
                Trial.status,
                Trial.reward,
                Trial.error_type,
                Trial.invalidated,
                Profile.name,
                Profile.version,
            )
            .join(Profile, Profile.id == Trial.profile_id)
            .where(
                Trial.job_id == self.job_id,
                or_(
                    Trial.status == TrialStatus.RUNNING,
                    Trial.finished_at >= self._since - _FINISH_OVERLAP,
                    Trial.id.in_(sorted(self._running)),
                ),
            )
            .order_by(Trial.member_position, Trial.attempt, Trial.profile_id)
        )
        with self._ctx.store.read() as session:
            rows = session.execute(query).all()
        return [
            TrialEvent(
                id=row.id,
                job_id=self.job_id,
                profile=f"{row.name}@{row.version}",
                task=row.task_name,
                attempt=row.attempt,
                status=row.status,
                reward=row.reward,
                error_type=row.error_type,
                invalidated=row.invalidated,
            )
            for row in rows
        ]
