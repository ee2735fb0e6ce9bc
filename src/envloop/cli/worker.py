"""`el worker` and `el runner list`."""

import asyncio
import contextlib
import logging
import signal
from typing import Annotated, cast, get_args

import typer

from envloop.cli.backend import operations
from envloop.cli.output import emit_json, note, out, table
from envloop.cli.state import context
from envloop.core.trial import EnvironmentChoice
from envloop.scheduling.background import CAPACITY_ENV, try_hold_lock
from envloop.scheduling.executor import choose_executor
from envloop.scheduling.worker import Worker, WorkerConfig
from envloop.services.errors import UserError

runner_app = typer.Typer(help="Runners: the versioned harnesses that execute tasks.", no_args_is_help=True)


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
    chosen, suggested = choose_executor(executor, ray_address)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    ctx = context()
    lock = try_hold_lock(ctx) if background else None
    if background and lock is None:
        note("a background worker is already running for this store")
        return
    if environment not in get_args(EnvironmentChoice):
        raise UserError(f"--environment {environment[:40]!r}: expected local, docker or auto")
    config = WorkerConfig(
        idle_exit=idle_exit,
        background=background,
        lease_ttl=lease_ttl,
        environment=cast(EnvironmentChoice, environment),
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


@runner_app.command("list")
def list_(json_: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False) -> None:
    """Runners this envloop can run, with the profile params each reads."""
    infos = operations().list_runners()
    if json_:
        emit_json(infos)
        return
    out.print(table(["runner", "tasks", "description"], [[i.ref, i.task_kind, i.description] for i in infos]))
