"""`envloop.LocalClient`: the operations of `envloop.Client`, run in this process on the embedded store.

A notebook or a script gets the same methods, return types and exceptions as over HTTP, without
`el serve`. The store is the one `el` uses: SQLite under `home` (default ENVLOOP_HOME, else
~/.envloop), or ENVLOOP_DATABASE_URL and ENVLOOP_ARTIFACTS when set.

    with LocalClient() as client:
        job = client.submit_job(JobRequest(dataset="bench@1", profiles=["team/agent@1"])).job
        for event in client.watch_job(job.id):
            ...

As `el job submit` does, a submission starts a background worker for the store when none is running
(`run_trials=False` leaves the trials to workers started otherwise, e.g. `el worker` elsewhere).
"""

import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from envloop.core.lazy_modules import lazy_module
from envloop.core.status import TERMINAL
from envloop.core.trajectory import Trajectory
from envloop.services.context import Context, open_context
from envloop.wire import (
    LOG_PAGE_BYTES,
    PAGE_STEPS,
    ApiKeyView,
    ArtifactInfo,
    BoardRow,
    Breakdown,
    Comparison,
    CreatedKey,
    CreatedShare,
    DatasetView,
    JobDiagnosis,
    JobProgress,
    JobRequest,
    JobResult,
    JobUsage,
    JobView,
    Plan,
    ProfileDocument,
    ProfileView,
    ProgressEvent,
    RolloutRequest,
    RolloutView,
    RunnerInfo,
    SamplePage,
    SampleQuery,
    ShareView,
    StepPage,
    SubmitResult,
    TrialView,
)

if TYPE_CHECKING:
    from envloop.services import (
        breakdown,
        compare,
        datasets,
        diagnosis,
        job_reads,
        jobs,
        keys,
        leaderboard,
        planning,
        profiles,
        results,
        rollouts,
        samples,
        shares,
        trace,
        trials,
        usage,
    )
else:
    # Each service module is imported when a method first uses it: `el job get` on the embedded
    # store loads neither SQLAlchemy nor the services that it does not call.
    breakdown = lazy_module("envloop.services.breakdown")
    compare = lazy_module("envloop.services.compare")
    datasets = lazy_module("envloop.services.datasets")
    diagnosis = lazy_module("envloop.services.diagnosis")
    job_reads = lazy_module("envloop.services.job_reads")
    jobs = lazy_module("envloop.services.jobs")
    keys = lazy_module("envloop.services.keys")
    leaderboard = lazy_module("envloop.services.leaderboard")
    planning = lazy_module("envloop.services.planning")
    profiles = lazy_module("envloop.services.profiles")
    results = lazy_module("envloop.services.results")
    rollouts = lazy_module("envloop.services.rollouts")
    samples = lazy_module("envloop.services.samples")
    shares = lazy_module("envloop.services.shares")
    trace = lazy_module("envloop.services.trace")
    trials = lazy_module("envloop.services.trials")
    usage = lazy_module("envloop.services.usage")

WATCH_POLL_SEC = 0.5
"""How often `watch_job` reads the store for changes (the server's event stream polls as often)."""


class LocalClient:
    """The service layer on this machine's store, with `envloop.Client`'s methods."""

    def __init__(self, home: Path | str | None = None, *, run_trials: bool = True) -> None:
        self._ctx = open_context(Path(home).expanduser() if home is not None else None)
        self._owned = True
        self.run_trials = run_trials

    @classmethod
    def on_context(cls, ctx: Context, run_trials: bool = False) -> "LocalClient":
        """A client on a context its caller opened and will close (the CLI's)."""
        client = cls.__new__(cls)
        client._ctx, client._owned, client.run_trials = ctx, False, run_trials
        return client

    @property
    def home(self) -> Path:
        return self._ctx.home

    def close(self) -> None:
        if self._owned:
            self._ctx.close()

    def __enter__(self) -> "LocalClient":
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _start_worker(self, status: str) -> None:
        if self.run_trials and status not in TERMINAL:
            from envloop.scheduling.background import start_background_worker  # noqa: PLC0415

            start_background_worker(self._ctx.home)

    # -- datasets, profiles, runners ----------------------------------------------------------------

    def push_dataset(
        self, path: Path, name: str, runner: str | None = None, scorer: str | None = None
    ) -> DatasetView:
        return datasets.push_dataset(self._ctx, Path(path), name, runner=runner, scorer=scorer)

    def get_dataset(self, ref: str) -> DatasetView:
        return datasets.get_dataset(self._ctx, ref)

    def list_datasets(self) -> list[DatasetView]:
        return datasets.list_datasets(self._ctx)

    def create_profile(self, name: str, version: str, document: ProfileDocument) -> ProfileView:
        return profiles.create_profile(self._ctx, name, version, document)

    def get_profile(self, ref: str) -> ProfileView:
        return profiles.get_profile(self._ctx, ref)

    def list_profiles(self) -> list[ProfileView]:
        return profiles.list_profiles(self._ctx)

    def list_runners(self) -> list[RunnerInfo]:
        from envloop.runners.registry import list_runners  # noqa: PLC0415 - loads every runner

        return list_runners()

    # -- jobs ---------------------------------------------------------------------------------------

    def submit_job(self, request: JobRequest) -> SubmitResult:
        submitted = jobs.submit_job(self._ctx, request)
        self._start_worker(submitted.job.status)
        return submitted

    def get_job(self, job_id: str) -> JobView:
        return job_reads.get_job(self._ctx, job_id)

    def job_progress(self, job_id: str) -> JobProgress:
        return jobs.job_progress(self._ctx, job_id)

    def list_jobs(
        self,
        status: str | None = None,
        tags: dict[str, str] | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[JobView]:
        return jobs.list_jobs(self._ctx, status=status, tags=tags, limit=limit, before=before)

    def job_result(self, job_id: str) -> JobResult:
        return results.job_result(self._ctx, job_id)

    def job_diagnosis(self, job_id: str) -> JobDiagnosis:
        return diagnosis.job_diagnosis(self._ctx, job_id)

    def job_breakdown(self, job_id: str, by: str) -> Breakdown:
        return breakdown.job_breakdown(self._ctx, job_id, by)

    def job_usage(self, job_id: str) -> JobUsage:
        return usage.job_usage(self._ctx, job_id)

    def job_samples(self, job_id: str, query: SampleQuery | None = None) -> SamplePage:
        return samples.job_samples(self._ctx, job_id, query or SampleQuery())

    def cancel_job(self, job_id: str) -> JobView:
        return jobs.cancel_job(self._ctx, job_id)

    def export_job(self, job_id: str) -> JobRequest:
        return jobs.export_job(self._ctx, job_id)

    def watch_job(self, job_id: str) -> Iterator[ProgressEvent]:
        """Job and trial status changes as they happen, until the job ends."""
        feed = rollouts.ProgressFeed(self._ctx, job_id)  # an unknown job fails here, before the first event

        def events() -> Iterator[ProgressEvent]:
            while True:
                yield from feed.poll()
                if feed.finished:
                    return
                time.sleep(WATCH_POLL_SEC)

        return events()

    # -- trials -------------------------------------------------------------------------------------

    def list_trials(
        self,
        job_id: str,
        status: str | None = None,
        task: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[TrialView]:
        return trials.list_trials(self._ctx, job_id, status=status, task=task, limit=limit, offset=offset)

    def get_trial(self, trial_id: str) -> TrialView:
        return trials.get_trial(self._ctx, trial_id)

    def trial_logs(
        self, trial_id: str, phase: str = "agent", offset: int = 0, limit: int = LOG_PAGE_BYTES
    ) -> dict[str, str]:
        return trials.trial_logs(self._ctx, trial_id, phase, offset, limit)

    def read_artifact(self, trial_id: str, relpath: str) -> Iterator[bytes]:
        """A kept file's bytes in chunks, read from the artifact store."""
        return trials.read_artifact(self._ctx, trial_id, relpath)

    def trial_steps(self, trial_id: str) -> Trajectory | None:
        return trace.trial_steps(self._ctx, trial_id)

    def trial_step_page(self, trial_id: str, offset: int = 0, limit: int = PAGE_STEPS) -> StepPage:
        return trace.step_page(self._ctx, trial_id, offset, limit)

    def list_artifacts(self, trial_id: str) -> list[ArtifactInfo]:
        return trials.list_artifacts(self._ctx, trial_id)

    def copy_artifacts(self, trial_id: str, dest: Path) -> list[ArtifactInfo]:
        """Copy every kept file of the trial under `dest`, keeping their relative paths."""
        return trials.copy_artifacts(self._ctx, trial_id, Path(dest))

    def invalidate_trial(self, trial_id: str, reason: str | None, undo: bool = False) -> TrialView:
        return trials.invalidate_trial(self._ctx, trial_id, reason, undo=undo)

    # -- rollouts -----------------------------------------------------------------------------------

    def start_rollout(self, request: RolloutRequest) -> RolloutView:
        started = rollouts.start_rollout(self._ctx, request)
        self._start_worker(started.trial.status)
        return started

    def get_rollout(self, trial_id: str) -> RolloutView:
        return rollouts.get_rollout(self._ctx, trial_id)

    def watch_rollout(self, trial_id: str) -> Iterator[ProgressEvent]:
        return self.watch_job(self.get_rollout(trial_id).job_id)

    # -- across runs --------------------------------------------------------------------------------

    def show_leaderboard(self, dataset: str | None = None) -> list[BoardRow]:
        return leaderboard.show_leaderboard(self._ctx, dataset)

    def add_to_leaderboard(self, job_id: str, profile: str | None = None) -> list[BoardRow]:
        return leaderboard.add_to_leaderboard(self._ctx, job_id, profile)

    def compare_runs(
        self,
        job_a: str,
        job_b: str | None = None,
        profile_a: str | None = None,
        profile_b: str | None = None,
    ) -> Comparison:
        return compare.compare_runs(self._ctx, job_a, job_b, profile_a, profile_b)

    def plan_comparison(
        self,
        job_id: str,
        effect: float,
        profile: str | None = None,
        power: float = 0.8,
        alpha: float = 0.05,
        correlation: float = 0.0,
    ) -> Plan:
        return planning.plan_comparison(self._ctx, job_id, effect, profile, power, alpha, correlation)

    # -- access -------------------------------------------------------------------------------------

    def create_share(self, job_id: str, expires_in_sec: float | None = None) -> CreatedShare:
        return shares.create_share(self._ctx, job_id, expires_in_sec)

    def list_shares(self, job_id: str) -> list[ShareView]:
        return shares.list_shares(self._ctx, job_id)

    def revoke_share(self, share_id: str) -> ShareView:
        return shares.revoke_share(self._ctx, share_id)

    def create_key(self, name: str | None = None) -> CreatedKey:
        return keys.create_key(self._ctx, name)

    def list_keys(self) -> list[ApiKeyView]:
        return keys.list_keys(self._ctx)

    def revoke_key(self, key_id: str) -> ApiKeyView:
        return keys.revoke_key(self._ctx, key_id)


__all__ = ["LocalClient"]
