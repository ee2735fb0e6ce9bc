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

from pathlib import Path

from envloop.core.status import TERMINAL
from envloop.operations import Operations
from envloop.operations.operation import Operation, Req, Resp
from envloop.services.context import Context, open_context


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
        """Do a declared operation with its service function, on this client's store (events are its
        feed polled, a download its file read in chunks: `Operation.serve`)."""
        answer = operation.serve(self._ctx, request)
        if operation.queued_status is not None:
            self._start_worker(operation.queued_status(answer))
        return answer

    def _start_worker(self, status: str) -> None:
        if self.run_trials and status not in TERMINAL:
            from envloop.scheduling.background import start_background_worker  # noqa: PLC0415

            start_background_worker(self._ctx.home)


__all__ = ["LocalClient"]
