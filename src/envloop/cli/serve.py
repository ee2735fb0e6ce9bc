"""`el serve`: the HTTP API, the console and local workers on one store.

Workers run as `el worker` child processes on the same store (with `--executor ray`, workers that
send their trials to a Ray cluster), exactly as they would on another machine: a worker that
crashes takes no request handling with it, and its trials go back to the queue when their leases
expire. A worker that exits unexpectedly is started again.
"""

import ctypes
import ipaddress
import os
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Annotated

import typer

from envloop.cli.output import note
from envloop.cli.state import context
from envloop.core.capacity import CAPACITY_ENV
from envloop.services.errors import UserError

if TYPE_CHECKING:
    from envloop.services.context import Context

RESTART_DELAY_SEC = 2.0
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child: get SIGTERM when `el serve` dies, even by SIGKILL, so no worker outlives it."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(0)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WorkerPool:
    """`count` worker processes on the server's store, restarted if they die, stopped on exit."""

    def __init__(self, ctx: "Context", count: int, args: list[str]) -> None:
        self._env = dict(os.environ, ENVLOOP_HOME=str(ctx.home), ENVLOOP_DATABASE_URL=ctx.store.url)
        self._args = [sys.executable, "-m", "envloop", "worker", *args]
        self._procs: list[subprocess.Popen[bytes]] = []
        self._count = count
        self._stopping = threading.Event()
        self._log = ctx.logs_dir
        self._thread = threading.Thread(target=self._supervise, name="worker-pool", daemon=True)

    def _spawn(self) -> subprocess.Popen[bytes]:
        self._log.mkdir(parents=True, exist_ok=True)
        with (self._log / "serve-workers.log").open("ab") as log:
            return subprocess.Popen(
                self._args,
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
            )

    def start(self) -> None:
        self._procs = [self._spawn() for _ in range(self._count)]
        self._thread.start()

    def _supervise(self) -> None:
        while not self._stopping.wait(RESTART_DELAY_SEC):
            for i, proc in enumerate(self._procs):
                if proc.poll() is not None and not self._stopping.is_set():
                    note(f"worker process {proc.pid} exited with {proc.returncode}; starting another")
                    self._procs[i] = self._spawn()

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM: each worker hands its running trials back to the queue before it exits."""
        self._stopping.set()
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in self._procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")] = 8000,
    workers: Annotated[
        int, typer.Option("--workers", min=0, help="Local worker processes (0: only external workers).")
    ] = 1,
    capacity: Annotated[
        int | None,
        typer.Option(
            "--capacity",
            min=1,
            envvar=CAPACITY_ENV,
            help="Trials per worker at once (default: max(2, cores)).",
        ),
    ] = None,
    lease_ttl: Annotated[
        float, typer.Option("--lease-ttl", min=1, help="Seconds before a silent worker's trials are re-run.")
    ] = 30.0,
    executor: Annotated[
        str,
        typer.Option(
            "--executor",
            help="Where the local workers run trials: local (this machine) or ray (a Ray cluster).",
        ),
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option("--ray-address", help="The Ray cluster (host:port; default RAY_ADDRESS, else auto)."),
    ] = None,
) -> None:
    """Serve the HTTP API (under /v1) and the console, with local workers running the queue."""
    # The web stack takes about a second to import: only `el serve` pays for it.
    import uvicorn  # noqa: PLC0415
    from sqlalchemy.engine import make_url  # noqa: PLC0415

    from envloop.api import create_app  # noqa: PLC0415
    from envloop.scheduling.executor import check_executor  # noqa: PLC0415
    from envloop.services.keys import has_active_key  # noqa: PLC0415

    check_executor(executor, ray_address)
    ctx = context()
    if not is_loopback(host) and not has_active_key(ctx.store):
        raise UserError(
            f"refusing to listen on {host} without authentication: create an API key first (el key create)"
        )
    args = ["--lease-ttl", str(lease_ttl), "--executor", executor]
    args += (["--capacity", str(capacity)] if capacity else []) + (
        ["--ray-address", ray_address] if ray_address else []
    )
    pool = WorkerPool(ctx, workers, args)
    # uvicorn re-raises the SIGTERM it handled once it has shut down; this makes that an exit that
    # still runs the `finally` below (stopping the workers) instead of killing the process outright.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    pool.start()
    store = make_url(ctx.store.url).render_as_string(hide_password=True)
    where = f", trials on Ray at {ray_address or 'RAY_ADDRESS or auto'}" if executor == "ray" else ""
    note(
        f"envloop console on http://{host}:{port}/, API under /v1 "
        f"(store {store}, {workers} local workers{where})"
    )
    try:
        uvicorn.run(create_app(ctx), host=host, port=port, log_level="warning", access_log=False)
    finally:
        pool.stop()
