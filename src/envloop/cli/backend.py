"""Where `el` sends its operations: the embedded store, or a server when ENVLOOP_URL is set.

Both sides offer the same operations with the same names and return types (the service functions
minus their context, and `envloop.Client`), so every command renders the same output either way.
"""

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from envloop.cli.state import context
from envloop.core.trajectory import Trajectory
from envloop.runners.base import RunnerInfo
from envloop.runners.registry import list_runners
from envloop.services import (
    compare,
    datasets,
    diagnosis,
    jobs,
    leaderboard,
    planning,
    profiles,
    results,
    shares,
    trials,
)
from envloop.services.compare import Comparison
from envloop.services.context import Context
from envloop.services.datasets import DatasetView
from envloop.services.diagnosis import JobDiagnosis
from envloop.services.jobs import JobProgress, JobRequest, JobView, SubmitResult
from envloop.services.leaderboard import BoardRow
from envloop.services.planning import Plan
from envloop.services.profiles import ProfileDocument, ProfileView
from envloop.services.results import JobResult
from envloop.services.shares import CreatedShare, ShareView
from envloop.services.trials import LOG_PAGE_BYTES, TrialView
from envloop.store.artifacts import ArtifactInfo

if TYPE_CHECKING:
    from envloop.client import Client


class Operations(Protocol):
    def push_dataset(
        self, path: Path, name: str, runner: str | None = None, scorer: str | None = None
    ) -> DatasetView: ...
    def get_dataset(self, ref: str) -> DatasetView: ...
    def list_datasets(self) -> list[DatasetView]: ...
    def create_profile(self, name: str, version: str, document: ProfileDocument) -> ProfileView: ...
    def get_profile(self, ref: str) -> ProfileView: ...
    def list_profiles(self) -> list[ProfileView]: ...
    def list_runners(self) -> list[RunnerInfo]: ...
    def submit_job(self, request: JobRequest) -> SubmitResult: ...
    def get_job(self, job_id: str) -> JobView: ...
    def job_progress(self, job_id: str) -> JobProgress: ...
    def list_jobs(
        self,
        status: str | None = None,
        tags: dict[str, str] | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[JobView]: ...
    def job_result(self, job_id: str) -> JobResult: ...
    def job_diagnosis(self, job_id: str) -> JobDiagnosis: ...
    def cancel_job(self, job_id: str) -> JobView: ...
    def export_job(self, job_id: str) -> JobRequest: ...
    def create_share(self, job_id: str, expires_in_sec: float | None = None) -> CreatedShare: ...
    def list_shares(self, job_id: str) -> list[ShareView]: ...
    def revoke_share(self, share_id: str) -> ShareView: ...
    def list_trials(
        self, job_id: str, status: str | None = None, task: str | None = None
    ) -> list[TrialView]: ...
    def get_trial(self, trial_id: str) -> TrialView: ...
    def trial_logs(
        self, trial_id: str, phase: str = "agent", offset: int = 0, limit: int = LOG_PAGE_BYTES
    ) -> dict[str, str]: ...
    def read_artifact(self, trial_id: str, relpath: str) -> Iterator[bytes]: ...
    def trial_steps(self, trial_id: str) -> Trajectory | None: ...
    def list_artifacts(self, trial_id: str) -> list[ArtifactInfo]: ...
    def copy_artifacts(self, trial_id: str, dest: Path) -> list[ArtifactInfo]: ...
    def invalidate_trial(self, trial_id: str, reason: str | None, undo: bool = False) -> TrialView: ...
    def add_to_leaderboard(self, job_id: str, profile: str | None = None) -> list[BoardRow]: ...
    def show_leaderboard(self, dataset: str | None = None) -> list[BoardRow]: ...
    def compare_runs(
        self, job_a: str, job_b: str | None = None, profile_a: str | None = None, profile_b: str | None = None
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


class Embedded:
    """The service layer on this machine's store."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def push_dataset(
        self, path: Path, name: str, runner: str | None = None, scorer: str | None = None
    ) -> DatasetView:
        return datasets.push_dataset(self.ctx, path, name, runner=runner, scorer=scorer)

    def get_dataset(self, ref: str) -> DatasetView:
        return datasets.get_dataset(self.ctx, ref)

    def list_datasets(self) -> list[DatasetView]:
        return datasets.list_datasets(self.ctx)

    def create_profile(self, name: str, version: str, document: ProfileDocument) -> ProfileView:
        return profiles.create_profile(self.ctx, name, version, document)

    def get_profile(self, ref: str) -> ProfileView:
        return profiles.get_profile(self.ctx, ref)

    def list_profiles(self) -> list[ProfileView]:
        return profiles.list_profiles(self.ctx)

    def list_runners(self) -> list[RunnerInfo]:
        return list_runners()

    def submit_job(self, request: JobRequest) -> SubmitResult:
        return jobs.submit_job(self.ctx, request)

    def get_job(self, job_id: str) -> JobView:
        return jobs.get_job(self.ctx, job_id)

    def job_progress(self, job_id: str) -> JobProgress:
        return jobs.job_progress(self.ctx, job_id)

    def list_jobs(
        self,
        status: str | None = None,
        tags: dict[str, str] | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[JobView]:
        return jobs.list_jobs(self.ctx, status=status, tags=tags, limit=limit, before=before)

    def job_result(self, job_id: str) -> JobResult:
        return results.job_result(self.ctx, job_id)

    def job_diagnosis(self, job_id: str) -> JobDiagnosis:
        return diagnosis.job_diagnosis(self.ctx, job_id)

    def cancel_job(self, job_id: str) -> JobView:
        return jobs.cancel_job(self.ctx, job_id)

    def export_job(self, job_id: str) -> JobRequest:
        return jobs.export_job(self.ctx, job_id)

    def create_share(self, job_id: str, expires_in_sec: float | None = None) -> CreatedShare:
        return shares.create_share(self.ctx, job_id, expires_in_sec)

    def list_shares(self, job_id: str) -> list[ShareView]:
        return shares.list_shares(self.ctx, job_id)

    def revoke_share(self, share_id: str) -> ShareView:
        return shares.revoke_share(self.ctx, share_id)

    def list_trials(self, job_id: str, status: str | None = None, task: str | None = None) -> list[TrialView]:
        return trials.list_trials(self.ctx, job_id, status=status, task=task)

    def get_trial(self, trial_id: str) -> TrialView:
        return trials.get_trial(self.ctx, trial_id)

    def trial_logs(
        self, trial_id: str, phase: str = "agent", offset: int = 0, limit: int = LOG_PAGE_BYTES
    ) -> dict[str, str]:
        return trials.trial_logs(self.ctx, trial_id, phase, offset, limit)

    def read_artifact(self, trial_id: str, relpath: str) -> Iterator[bytes]:
        return trials.read_artifact(self.ctx, trial_id, relpath)

    def trial_steps(self, trial_id: str) -> Trajectory | None:
        return trials.trial_steps(self.ctx, trial_id)

    def list_artifacts(self, trial_id: str) -> list[ArtifactInfo]:
        return trials.list_artifacts(self.ctx, trial_id)

    def copy_artifacts(self, trial_id: str, dest: Path) -> list[ArtifactInfo]:
        return trials.copy_artifacts(self.ctx, trial_id, dest)

    def invalidate_trial(self, trial_id: str, reason: str | None, undo: bool = False) -> TrialView:
        return trials.invalidate_trial(self.ctx, trial_id, reason, undo=undo)

    def add_to_leaderboard(self, job_id: str, profile: str | None = None) -> list[BoardRow]:
        return leaderboard.add_to_leaderboard(self.ctx, job_id, profile)

    def show_leaderboard(self, dataset: str | None = None) -> list[BoardRow]:
        return leaderboard.show_leaderboard(self.ctx, dataset)

    def compare_runs(
        self, job_a: str, job_b: str | None = None, profile_a: str | None = None, profile_b: str | None = None
    ) -> Comparison:
        return compare.compare_runs(self.ctx, job_a, job_b, profile_a, profile_b)

    def plan_comparison(
        self,
        job_id: str,
        effect: float,
        profile: str | None = None,
        power: float = 0.8,
        alpha: float = 0.05,
        correlation: float = 0.0,
    ) -> Plan:
        return planning.plan_comparison(self.ctx, job_id, effect, profile, power, alpha, correlation)


_remote: "Client | None" = None


def remote() -> "Client | None":
    """The server client when ENVLOOP_URL is set (the client is imported only then)."""
    global _remote  # noqa: PLW0603 - one connection per CLI process
    if _remote is None and os.environ.get("ENVLOOP_URL"):
        from envloop.client import Client  # noqa: PLC0415

        _remote = Client()
    return _remote


def operations() -> Operations:
    client = remote()
    return client if client is not None else Embedded(context())
