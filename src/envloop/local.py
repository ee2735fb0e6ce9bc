"""`envloop.LocalClient`: the operations of `envloop.Client`, run in this process on the embedded store.

A notebook or a script gets the same methods, return types and exceptions as over HTTP, without
`el serve`. The store is the one `el` uses: SQLite under `home` (default ENVLOOP_HOME, else
~/.envloop), or ENVLOOP_DATABASE_URL and ENVLOOP_ARTIFACTS when set.

    with LocalClient() as client:
        job = client.submit_job(JobRequest(dataset="bench@1", profiles=["team/agent@1"])).job
        for event in client.watch_job(job.id):
            ...

A submission (`el job submit` makes its own through this client) starts a background worker for the
store when none is running, before the request is checked, so the two start-ups overlap; a refused
submission stops it again (`envloop.scheduling.background.SubmissionWorker`). `capacity` is that
worker's trials at once (default: enough for the job's own concurrency limit, at least a worker's
default); `run_trials=False` leaves the trials to workers started otherwise, e.g. `el worker`
elsewhere.
"""

from pathlib import Path

from envloop.operations import Operations
from envloop.operations.operation import Operation, Req, Resp
from envloop.services.context import Context, open_context
from envloop.wire.jobs import SubmitJob


class LocalClient(Operations):
    """The service layer on this machine's store, with `envloop.Client`'s methods."""

    left_to_running_worker: bool
    """Whether the trials the last submission queued were left to a background worker that was
    running already (with its own capacity, not `capacity`)."""

    def __init__(
        self, home: Path | str | None = None, *, run_trials: bool = True, capacity: int | None = None
    ) -> None:
        self._ctx = open_context(Path(home).expanduser() if home is not None else None)
        self._owned = True
        self.run_trials = run_trials
        self.capacity = capacity
        self.left_to_running_worker = False

    @classmethod
    def on_context(cls, ctx: Context, run_trials: bool = False, capacity: int | None = None) -> "LocalClient":
        """A client on a context its caller opened and will close (the CLI's)."""
        client = cls.__new__(cls)
        client._ctx, client._owned = ctx, False
        client.run_trials, client.capacity, client.left_to_running_worker = run_trials, capacity, False
        return client

    @property
    def home(self) -> Path:
        return self._ctx.home

    def close(self) -> None:
        if self._owned:
            self._ctx.close()

    def call(self, operation: Operation[..., Req, Resp], request: Req) -> Resp:
        """Do a declared operation with its service function, on this client's store (events are its
        feed polled, a download its file read in chunks: `Operation.serve`); one that queues trials
        has a background worker for them."""
        if operation.queued_status is None or not self.run_trials:
            return operation.serve(self._ctx, request)
        from envloop.scheduling.background import SubmissionWorker, submission_capacity  # noqa: PLC0415

        concurrency = request.request.concurrency if isinstance(request, SubmitJob) else None
        worker = SubmissionWorker(self._ctx.home, submission_capacity(self.capacity, concurrency))
        try:
            answer = operation.serve(self._ctx, request)
        except BaseException:
            worker.stop()
            raise
        self.left_to_running_worker = worker.keep_for(operation.queued_status(answer))
        return answer


__all__ = ["LocalClient"]
