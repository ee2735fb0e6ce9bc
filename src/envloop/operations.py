"""The operations envloop offers its callers, each declared once.

`envloop.Client` (over HTTP) and `envloop.LocalClient` (on the embedded store, in this process) are
both `Operations`: the same methods with the same parameters and return types, and the same
exception classes (`UserError`, `NotFoundError`, `ConflictError`, `ServerError`). Code written
against one runs against the other, and the CLI renders either.

Most operations are an `Operation` declaration below (see `envloop.operation`): the method of each
client, the HTTP route and the call into the service layer all come from it. The methods written
out at the end stream (events, files), upload, or are answered differently by the two clients; each
client writes those itself.
"""

from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Self

from envloop.core.trajectory import Trajectory
from envloop.operation import Operation, Req, Resp
from envloop.wire import (
    LOG_PAGE_BYTES,
    PAGE_STEPS,
    AddToLeaderboard,
    ApiKeyView,
    ArtifactInfo,
    BoardRow,
    Breakdown,
    CompareRuns,
    Comparison,
    CreatedKey,
    CreatedShare,
    CreateKey,
    CreateShare,
    DatasetView,
    JobDiagnosis,
    JobProgress,
    JobRequest,
    JobResult,
    JobUsage,
    JobView,
    ListKeys,
    ListShares,
    Plan,
    PlanComparison,
    ProfileDocument,
    ProfileView,
    ProgressEvent,
    RevokeKey,
    RevokeShare,
    RolloutRequest,
    RolloutView,
    RunnerInfo,
    SamplePage,
    SampleQuery,
    ShareView,
    ShowLeaderboard,
    StepPage,
    SubmitResult,
    TrialView,
)


class Operations(ABC):
    """Everything a client of envloop can do; each method is the service function of the same name
    without its context argument."""

    @abstractmethod
    def call(self, operation: Operation[..., Req, Resp], request: Req) -> Resp:
        """Do a declared operation: what each method of a declaration calls."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- across runs --------------------------------------------------------------------------------

    show_leaderboard = Operation(
        "GET",
        "/v1/leaderboard",
        ShowLeaderboard,
        list[BoardRow],
        service="envloop.services.leaderboard:show_leaderboard",
        tag="leaderboard",
        doc="Ranked rows (job, profile) of the project's boards, each with its coverage.",
    )
    add_to_leaderboard = Operation(
        "POST",
        "/v1/leaderboard",
        AddToLeaderboard,
        list[BoardRow],
        service="envloop.services.leaderboard:add_to_leaderboard",
        tag="leaderboard",
        body="LeaderboardAdd",
        doc="Save a finished job's rows; adding it again returns the saved rows unchanged.",
    )
    compare_runs = Operation(
        "GET",
        "/v1/compare",
        CompareRuns,
        Comparison,
        service="envloop.services.compare:compare_runs",
        tag="compare",
        doc="Paired comparison B - A on the tasks both scored: difference, s.e., 95% CI, correlation.",
    )
    plan_comparison = Operation(
        "GET",
        "/v1/jobs/{job_id}/plan",
        PlanComparison,
        Plan,
        service="envloop.services.planning:plan_comparison",
        tag="compare",
        scope="job",
        doc="Tasks and attempts a comparison needs to detect `effect`, from this job's variance.",
    )

    # -- access -------------------------------------------------------------------------------------

    list_keys = Operation(
        "GET",
        "/v1/keys",
        ListKeys,
        list[ApiKeyView],
        service="envloop.services.keys:list_keys",
        tag="keys",
        doc="The calling project's keys, revoked ones included; secrets are never shown again.",
    )
    create_key = Operation(
        "POST",
        "/v1/keys",
        CreateKey,
        CreatedKey,
        service="envloop.services.keys:create_key",
        tag="keys",
        status_code=201,
        body="KeyRequest",
        doc="Another key for the calling project; the response is the only time its secret is shown.",
    )
    revoke_key = Operation(
        "POST",
        "/v1/keys/{key_id}/revoke",
        RevokeKey,
        ApiKeyView,
        service="envloop.services.keys:revoke_key",
        tag="keys",
    )
    create_share = Operation(
        "POST",
        "/v1/jobs/{job_id}/shares",
        CreateShare,
        CreatedShare,
        service="envloop.services.shares:create_share",
        tag="shares",
        status_code=201,
        body="ShareRequest",
        doc="A read-only token for this job; the response is the only time the token is shown.",
    )
    list_shares = Operation(
        "GET",
        "/v1/jobs/{job_id}/shares",
        ListShares,
        list[ShareView],
        service="envloop.services.shares:list_shares",
        tag="shares",
    )
    revoke_share = Operation(
        "POST",
        "/v1/shares/{share_id}/revoke",
        RevokeShare,
        ShareView,
        service="envloop.services.shares:revoke_share",
        tag="shares",
    )

    # -- written out by each client -----------------------------------------------------------------

    # datasets, profiles, runners
    @abstractmethod
    def push_dataset(
        self, path: Path, name: str, runner: str | None = None, scorer: str | None = None
    ) -> DatasetView: ...
    @abstractmethod
    def get_dataset(self, ref: str) -> DatasetView: ...
    @abstractmethod
    def list_datasets(self) -> list[DatasetView]: ...
    @abstractmethod
    def create_profile(self, name: str, version: str, document: ProfileDocument) -> ProfileView: ...
    @abstractmethod
    def get_profile(self, ref: str) -> ProfileView: ...
    @abstractmethod
    def list_profiles(self) -> list[ProfileView]: ...
    @abstractmethod
    def list_runners(self) -> list[RunnerInfo]: ...

    # jobs
    @abstractmethod
    def submit_job(self, request: JobRequest) -> SubmitResult: ...
    @abstractmethod
    def get_job(self, job_id: str) -> JobView: ...
    @abstractmethod
    def job_progress(self, job_id: str) -> JobProgress:
        """The job's status and trial counts: what a follower polls."""
        ...

    @abstractmethod
    def list_jobs(
        self,
        status: str | None = None,
        tags: dict[str, str] | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[JobView]:
        """One page of jobs, newest first; the next page is `before` the last job of this one."""
        ...

    @abstractmethod
    def job_result(self, job_id: str) -> JobResult: ...
    @abstractmethod
    def job_diagnosis(self, job_id: str) -> JobDiagnosis: ...
    @abstractmethod
    def job_breakdown(self, job_id: str, by: str) -> Breakdown:
        """Score and coverage per value of a metadata field of the job's tasks, per profile."""
        ...

    @abstractmethod
    def job_usage(self, job_id: str) -> JobUsage:
        """Model calls, tokens and their cost, and trial durations, per profile and for the job."""
        ...

    @abstractmethod
    def job_samples(self, job_id: str, query: SampleQuery | None = None) -> SamplePage:
        """One row per attempt with its input, target and output: filtered, searched, sorted, paged."""
        ...

    @abstractmethod
    def cancel_job(self, job_id: str) -> JobView: ...
    @abstractmethod
    def export_job(self, job_id: str) -> JobRequest: ...
    @abstractmethod
    def watch_job(self, job_id: str) -> Iterator[ProgressEvent]:
        """Job and trial status changes as they happen, until the job ends."""
        ...

    # trials
    @abstractmethod
    def list_trials(
        self,
        job_id: str,
        status: str | None = None,
        task: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[TrialView]: ...
    @abstractmethod
    def get_trial(self, trial_id: str) -> TrialView: ...
    @abstractmethod
    def trial_logs(
        self, trial_id: str, phase: str = "agent", offset: int = 0, limit: int = LOG_PAGE_BYTES
    ) -> dict[str, str]: ...
    @abstractmethod
    def read_artifact(self, trial_id: str, relpath: str) -> Iterator[bytes]: ...
    @abstractmethod
    def trial_steps(self, trial_id: str) -> Trajectory | None: ...
    @abstractmethod
    def trial_step_page(self, trial_id: str, offset: int = 0, limit: int = PAGE_STEPS) -> StepPage: ...
    @abstractmethod
    def list_artifacts(self, trial_id: str) -> list[ArtifactInfo]: ...
    @abstractmethod
    def copy_artifacts(self, trial_id: str, dest: Path) -> list[ArtifactInfo]: ...
    @abstractmethod
    def invalidate_trial(self, trial_id: str, reason: str | None, undo: bool = False) -> TrialView: ...

    # rollouts
    @abstractmethod
    def start_rollout(self, request: RolloutRequest) -> RolloutView: ...
    @abstractmethod
    def get_rollout(self, trial_id: str) -> RolloutView: ...
    @abstractmethod
    def watch_rollout(self, trial_id: str) -> Iterator[ProgressEvent]: ...
