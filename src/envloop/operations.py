"""The operations envloop offers its callers, each declared once.

`envloop.Client` (over HTTP) and `envloop.LocalClient` (on the embedded store, in this process) are
both `Operations`: the same methods with the same parameters and return types, and the same
exception classes (`UserError`, `NotFoundError`, `ConflictError`, `ServerError`). Code written
against one runs against the other, and the CLI renders either.

Most operations are an `Operation` declaration (`envloop.declarations`, see `envloop.operation`):
the method of each client, the HTTP route and the call into the service layer all come from it.
The methods written out below stream (events, files), upload, or are answered differently by the
two clients; each client writes those itself.
"""

from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self

from envloop.core.status import JobStatus
from envloop.declarations import Declarations
from envloop.operation import Operation, Req, Resp

if TYPE_CHECKING:
    from envloop.core.trajectory import Trajectory
    from envloop.wire import ArtifactInfo, DatasetView, JobProgress, JobView, ProgressEvent


class Operations(Declarations, ABC):
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

    # -- written out by each client -----------------------------------------------------------------

    @abstractmethod
    def push_dataset(
        self, path: Path, name: str, runner: str | None = None, scorer: str | None = None
    ) -> "DatasetView":
        """Upload a task directory, a folder of tasks or a JSONL file as NAME@N."""

    @abstractmethod
    def list_jobs(
        self,
        status: JobStatus | None = None,
        tags: dict[str, str] | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> "list[JobView]":
        """One page of jobs, newest first; the next page is `before` the last job of this one."""

    @abstractmethod
    def job_progress(self, job_id: str) -> "JobProgress":
        """The job's status and trial counts: what a follower polls."""

    @abstractmethod
    def watch_job(self, job_id: str) -> "Iterator[ProgressEvent]":
        """Job and trial status changes as they happen, until the job ends."""

    @abstractmethod
    def watch_rollout(self, trial_id: str) -> "Iterator[ProgressEvent]":
        """The rollout's status changes as they happen, until it ends."""

    @abstractmethod
    def trial_steps(self, trial_id: str) -> "Trajectory | None":
        """The whole trajectory (streamed over HTTP); `trial_step_page` reads it a page at a time."""

    @abstractmethod
    def read_artifact(self, trial_id: str, relpath: str) -> Iterator[bytes]:
        """A kept file's bytes in chunks."""

    @abstractmethod
    def copy_artifacts(self, trial_id: str, dest: Path) -> "list[ArtifactInfo]":
        """Copy every kept file of the trial under `dest`, keeping their relative paths."""
