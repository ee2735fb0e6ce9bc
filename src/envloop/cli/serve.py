"""`el serve`: the HTTP API, the console and local workers on one store.

Workers run as `el worker` child processes on the same store (with `--executor ray`, workers that
send their trials to a Ray cluster), exactly as they would on another machine: a worker that
crashes takes no request handling with it, and its trials go back to the queue when their leases
expire. A worker that exits unexpectedly is started again.
"""

import ipaddress
import signal
from pathlib import Path
from typing import Annotated

import typer

from envloop.cli.options import LeaseTtlOpt, RayAddressOpt
from envloop.cli.output import note
from envloop.cli.state import context
from envloop.core.capacity import CAPACITY_ENV, LEASE_TTL_SEC
from envloop.core.words import plural
from envloop.errors import UserError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
"""Where `el serve` answers when started with its defaults: the console a share link opens."""
SHUTDOWN_GRACE_SEC = 5
"""How long a stopping server lets requests in flight finish: an event stream (a follower, the
console's live pages) never ends by itself, and would hold the server up for ever."""


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(0)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


ADDRESS_FILE = "serve-address"
"""Where a running `el serve` leaves its address in its home, so `el job share` prints a page on
the port it actually listens on rather than the default one."""


def record_address(home: Path, host: str, port: int) -> str:
    """Write this server's address (loopback for an unspecified host, which is no address a reader
    can open) into the home; returns it."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else f"[{host}]" if ":" in host else host
    address = f"http://{shown}:{port}"
    (home / ADDRESS_FILE).write_text(address + "\n")
    return address


def forget_address(home: Path, address: str) -> None:
    """Remove the address on exit, unless another `el serve` on the same home wrote its own since."""
    path = home / ADDRESS_FILE
    try:
        if path.read_text().strip() == address:
            path.unlink()
    except OSError:
        return


def served_address(home: Path) -> str | None:
    """The address the last `el serve` on this home recorded, if one is running (or was stopped
    without a chance to remove it)."""
    try:
        return (home / ADDRESS_FILE).read_text().strip() or None
    except OSError:
        return None


def serve(
    host: Annotated[
        str, typer.Option("--host", help="Address to bind (loopback by default).")
    ] = DEFAULT_HOST,
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")] = DEFAULT_PORT,
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
    lease_ttl: LeaseTtlOpt = LEASE_TTL_SEC,
    executor: Annotated[
        str,
        typer.Option(
            "--executor",
            help="Where the local workers run trials: local (this machine) or ray (a Ray cluster).",
        ),
    ] = "local",
    ray_address: RayAddressOpt = None,
) -> None:
    """Serve the HTTP API (under /v1) and the console, with local workers running the queue."""
    # The web stack takes about a second to import: only `el serve` pays for it.
    import uvicorn  # noqa: PLC0415
    from sqlalchemy.engine import make_url  # noqa: PLC0415

    from envloop.console import api_and_console  # noqa: PLC0415
    from envloop.runners.model_route import PRIVATE_UPSTREAM_VARIABLE  # noqa: PLC0415
    from envloop.scheduling.executor_choice import check_executor  # noqa: PLC0415
    from envloop.scheduling.pool import WorkerPool, worker_env  # noqa: PLC0415
    from envloop.services.keys import has_active_key  # noqa: PLC0415

    check_executor(executor, ray_address)
    ctx = context()
    if not is_loopback(host) and not has_active_key(ctx.store):
        raise UserError(
            f"refusing to listen on {host} without authentication: create an API key first (el key create)"
        )
    args = ["--lease-ttl", str(lease_ttl), "--executor", executor, "--processes", "1"]
    args += (["--capacity", str(capacity)] if capacity else []) + (
        ["--ray-address", ray_address] if ray_address else []
    )
    env = worker_env(ctx.home, ctx.store.url)
    if not is_loopback(host):
        # Served to others, a profile may not turn the workers' model gateway into a way into
        # their own network, unless the operator says so.
        env.setdefault(PRIVATE_UPSTREAM_VARIABLE, "deny")
    pool = WorkerPool([args] * workers, env, ctx.logs_dir / "serve-workers.log")
    # uvicorn re-raises the SIGTERM it handled once it has shut down; this makes that an exit that
    # still runs the `finally` below (stopping the workers) instead of killing the process outright.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    pool.start()
    store = make_url(ctx.store.url).render_as_string(hide_password=True)
    where = f", trials on Ray at {ray_address or 'RAY_ADDRESS or auto'}" if executor == "ray" else ""
    note(
        f"envloop console on http://{host}:{port}/, API under /v1 "
        f"(store {store}, {plural(workers, 'local worker')}{where})"
    )
    recorded = record_address(ctx.home, host, port)
    try:
        uvicorn.run(
            api_and_console(ctx),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_SEC,
        )
    finally:
        forget_address(ctx.home, recorded)
        pool.stop()
