"""`el worker`."""

import asyncio
import contextlib
import logging
import signal
from typing import Annotated

import typer

from envloop.cli.output import note
from envloop.cli.state import context
from envloop.core.capacity import CAPACITY_ENV


def worker(
    capacity: Annotated[
        int | None,
        typer.Option(
            "--capacity", min=1, envvar=CAPACITY_ENV, help="Trials at once (default: max(2, cores))."
        ),
    ] = None,
    idle_exit: Annotated[
        float | None, typer.Option("--idle-exit", help="Exit after the queue stays empty this many seconds.")
    ] = None,
    lease_ttl: Annotated[
        float, typer.Option("--lease-ttl", min=1, help="Seconds before a silent worker's trials are re-run.")
    ] = 30.0,
    environment: Annotated[
        str,
        typer.Option(
            "--environment",
            help="Where trials of jobs that chose none run: local, docker or auto.",
        ),
    ] = "local",
    executor: Annotated[
        str, typer.Option("--executor", help="Where trials run: local (this machine) or ray (a Ray cluster).")
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option("--ray-address", help="The Ray cluster (host:port; default RAY_ADDRESS, else auto)."),
    ] = None,
    background: Annotated[bool, typer.Option("--background", hidden=True)] = False,
) -> None:
    """Run a worker in the foreground on the store: claim trials from the queue and run them."""
    # The scheduler, the runners and the sandbox load when a worker starts, not for --help.
    from envloop.scheduling.background import try_hold_lock  # noqa: PLC0415
    from envloop.scheduling.executor import choose_executor  # noqa: PLC0415
    from envloop.scheduling.worker import Worker, WorkerConfig  # noqa: PLC0415
    from envloop.services.components import check_environment  # noqa: PLC0415

    chosen, suggested = choose_executor(executor, ray_address)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    ctx = context()
    lock = try_hold_lock(ctx.home) if background else None
    if background and lock is None:
        note("a background worker is already running for this store")
        return
    check_environment(environment)
    config = WorkerConfig(
        idle_exit=idle_exit,
        background=background,
        lease_ttl=lease_ttl,
        environment=environment,
    )
    if capacity is not None:
        config.capacity = capacity
    if capacity is None and suggested is not None:
        config.capacity = suggested
    runner = Worker(ctx, config, executor=chosen)
    note(f"worker {runner.id} on {ctx.store.url} (capacity {config.capacity})")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, runner.stop)
        await runner.run()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    note(f"worker {runner.id} stopped after {runner.completed} trials")
