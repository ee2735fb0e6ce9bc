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
from typing import TYPE_CHECKING

from envloop.core.lazy_modules import lazy_module
from envloop.core.status import TERMINAL, JobStatus
from envloop.operation import Operation, Req, Resp
from envloop.operations import Operations
from envloop.services.context import Context, open_context

if TYPE_CHECKING:
    from envloop.core.trajectory import Trajectory
    from envloop.services import datasets, jobs, rollouts, trace, trials
    from envloop.wire import ArtifactInfo, DatasetView, JobProgress, JobView, ProgressEvent
else:
    # Each service module is imported when a method first uses it (a declared operation's own
    # service module is, by its declaration): `el job get` on the embedded store loads neither
    # SQLAlchemy nor the services that it does not call.
    datasets = lazy_module("envloop.services.datasets")
    jobs = lazy_module("envloop.services.jobs")
    rollouts = lazy_module("envloop.services.rollouts")
    trace = lazy_module("envloop.services.trace")
    trials = lazy_module("envloop.services.trials")

WATCH_POLL_SEC = 0.5
"""How often `watch_job` reads the store for changes (the server's event stream polls as often)."""


class LocalClient(Operations):
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

    def call(self, operation: Operation[..., Req, Resp], request: Req) -> Resp:
        """Do a declared operation with its service function, on this client's store."""
        answer = operation.serve(self._ctx, request)
        if operation.queued_status is not None:
            self._start_worker(operation.queued_status(answer))
        return answer

    def _start_worker(self, status: str) -> None:
        if self.run_trials and status not in TERMINAL:
            from envloop.scheduling.background import start_background_worker  # noqa: PLC0415

            start_background_worker(self._ctx.home)

    # -- datasets, profiles, runners ----------------------------------------------------------------

    def push_dataset(
        self, path: Path, name: str, runner: str | None = None, scorer: str | None = None
    ) -> "DatasetView":
        return datasets.push_dataset(self._ctx, Path(path), name, runner=runner, scorer=scorer)

    # -- jobs ---------------------------------------------------------------------------------------

    def job_progress(self, job_id: str) -> "JobProgress":
        return jobs.job_progress(self._ctx, job_id)

    def list_jobs(
        self,
        status: JobStatus | None = None,
        tags: dict[str, str] | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> "list[JobView]":
        return jobs.list_jobs(self._ctx, status=status, tags=tags, limit=limit, before=before)

    def watch_job(self, job_id: str) -> "Iterator[ProgressEvent]":
        """Job and trial status changes as they happen, until the job ends."""
        feed = rollouts.ProgressFeed(self._ctx, job_id)  # an unknown job fails here, before the first event

        def events() -> "Iterator[ProgressEvent]":
            while True:
                yield from feed.poll()
                if feed.finished:
                    return
                time.sleep(WATCH_POLL_SEC)

        return events()

    # -- trials -------------------------------------------------------------------------------------

    def read_artifact(self, trial_id: str, relpath: str) -> Iterator[bytes]:
        """A kept file's bytes in chunks, read from the artifact store."""
        return trials.read_artifact(self._ctx, trial_id, relpath)

    def trial_steps(self, trial_id: str) -> "Trajectory | None":
        return trace.trial_steps(self._ctx, trial_id)

    def copy_artifacts(self, trial_id: str, dest: Path) -> "list[ArtifactInfo]":
        """Copy every kept file of the trial under `dest`, keeping their relative paths."""
        return trials.copy_artifacts(self._ctx, trial_id, Path(dest))

    # -- rollouts -----------------------------------------------------------------------------------

    def watch_rollout(self, trial_id: str) -> "Iterator[ProgressEvent]":
        return self.watch_job(self.get_rollout(trial_id).job_id)


__all__ = ["LocalClient"]
