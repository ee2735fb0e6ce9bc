"""The operations envloop offers its callers, as one typed contract.

`envloop.Client` (over HTTP) and `envloop.LocalClient` (on the embedded store, in this process) both
satisfy `Operations`, method for method: the same names, parameters and return types, and the same
exception classes (`UserError`, `NotFoundError`, `ConflictError`, `ServerError`). Code written
against one runs against the other, and the CLI renders either. mypy checks both classes against
this Protocol (see `envloop.cli.backend.operations`), and a test compares their signatures.
"""

from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self

from envloop.core.trajectory import Trajectory
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


class Operations(Protocol):
    """Everything a client of envloop can do; each method is the service function of the same name
    without its context argument."""

    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    # datasets, profiles, runners
    def push_dataset(
        self, path: Path, name: str, runner: str | None = None, scorer: str | None = None
    ) -> DatasetView: ...
    def get_dataset(self, ref: str) -> DatasetView: ...
    def list_datasets(self) -> list[DatasetView]: ...
    def create_profile(self, name: str, version: str, document: ProfileDocument) -> ProfileView: ...
    def get_profile(self, ref: str) -> ProfileView: ...
    def list_profiles(self) -> list[ProfileView]: ...
    def list_runners(self) -> list[RunnerInfo]: ...

    # jobs
    def submit_job(self, request: JobRequest) -> SubmitResult: ...
    def get_job(self, job_id: str) -> JobView: ...
    def job_progress(self, job_id: str) -> JobProgress:
        """The job's status and trial counts: what a follower polls."""
        ...

    def list_jobs(
        self,
        status: str | None = None,
        tags: dict[str, str] | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[JobView]:
        """One page of jobs, newest first; the next page is `before` the last job of this one."""
        ...

    def job_result(self, job_id: str) -> JobResult: ...
    def job_diagnosis(self, job_id: str) -> JobDiagnosis: ...
    def job_breakdown(self, job_id: str, by: str) -> Breakdown:
        """Score and coverage per value of a metadata field of the job's tasks, per profile."""
        ...

    def job_usage(self, job_id: str) -> JobUsage:
        """Model calls, tokens and their cost, and trial durations, per profile and for the job."""
        ...

    def job_samples(self, job_id: str, query: SampleQuery | None = None) -> SamplePage:
        """One row per attempt with its input, target and output: filtered, searched, sorted, paged."""
        ...

    def cancel_job(self, job_id: str) -> JobView: ...
    def export_job(self, job_id: str) -> JobRequest: ...
    def watch_job(self, job_id: str) -> Iterator[ProgressEvent]:
        """Job and trial status changes as they happen, until the job ends."""
        ...

    # trials
    def list_trials(
        self,
        job_id: str,
        status: str | None = None,
        task: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[TrialView]: ...
    def get_trial(self, trial_id: str) -> TrialView: ...
    def trial_logs(
        self, trial_id: str, phase: str = "agent", offset: int = 0, limit: int = LOG_PAGE_BYTES
    ) -> dict[str, str]: ...
    def read_artifact(self, trial_id: str, relpath: str) -> Iterator[bytes]: ...
    def trial_steps(self, trial_id: str) -> Trajectory | None: ...
    def trial_step_page(self, trial_id: str, offset: int = 0, limit: int = PAGE_STEPS) -> StepPage: ...
    def list_artifacts(self, trial_id: str) -> list[ArtifactInfo]: ...
    def copy_artifacts(self, trial_id: str, dest: Path) -> list[ArtifactInfo]: ...
    def invalidate_trial(self, trial_id: str, reason: str | None, undo: bool = False) -> TrialView: ...

    # rollouts
    def start_rollout(self, request: RolloutRequest) -> RolloutView: ...
    def get_rollout(self, trial_id: str) -> RolloutView: ...
    def watch_rollout(self, trial_id: str) -> Iterator[ProgressEvent]: ...

    # across runs
    def show_leaderboard(self, dataset: str | None = None) -> list[BoardRow]: ...
    def add_to_leaderboard(self, job_id: str, profile: str | None = None) -> list[BoardRow]: ...
    def compare_runs(
        self,
        job_a: str,
        job_b: str | None = None,
        profile_a: str | None = None,
        profile_b: str | None = None,
    ) -> Comparison: ...
    def plan_comparison(
        self,
        job_id: str,
        effect: float,
        profile: str | None = None,
        power: float = 0.8,
        alpha: float = 0.05,
        correlation: float = 0.0,
    ) -> Plan: ...

    # access
    def create_share(self, job_id: str, expires_in_sec: float | None = None) -> CreatedShare: ...
    def list_shares(self, job_id: str) -> list[ShareView]: ...
    def revoke_share(self, share_id: str) -> ShareView: ...
    def create_key(self, name: str | None = None) -> CreatedKey: ...
    def list_keys(self) -> list[ApiKeyView]: ...
    def revoke_key(self, key_id: str) -> ApiKeyView: ...
