"""`el worker`."""

import logging
from typing import Annotated

import typer

from envloop.cli.options import LeaseTtlOpt, RayAddressOpt
from envloop.cli.output import note
from envloop.cli.state import context
from envloop.core.capacity import CAPACITY_ENV, LEASE_TTL_SEC, PROCESSES_ENV, default_capacity
from envloop.core.words import plural
from envloop.errors import UserError
from envloop.home import envloop_home, private_dir
from envloop.settings import settings


def worker(
    capacity: Annotated[
        int | None,
        typer.Option(
            "--capacity", min=1, envvar=CAPACITY_ENV, help="Trials at once (default: max(2, cores))."
        ),
    ] = None,
    processes: Annotated[
        int | None,
        typer.Option(
            "--processes",
            min=1,
            envvar=PROCESSES_ENV,
            help="Worker processes sharing the capacity, each with its own interpreter (local executor; "
            "default: one per core, each running at least two trials).",
        ),
    ] = None,
    idle_exit: Annotated[
        float | None, typer.Option("--idle-exit", help="Exit after the queue stays empty this many seconds.")
    ] = None,
    lease_ttl: LeaseTtlOpt = LEASE_TTL_SEC,
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
    ray_address: RayAddressOpt = None,
    background: Annotated[bool, typer.Option("--background", hidden=True)] = False,
    in_group: Annotated[bool, typer.Option("--in-group", hidden=True)] = False,
) -> None:
    """Run a worker in the foreground on the store: claim trials from the queue and run them."""
    from envloop.scheduling.background import try_hold_lock  # noqa: PLC0415
    from envloop.scheduling.process import capacity_shares, run_worker, start_group  # noqa: PLC0415

    if processes is not None and processes > 1 and executor != "local":
        raise UserError(
            f"--processes (or {PROCESSES_ENV}) applies to --executor local: Ray spreads trials itself"
        )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    home = private_dir(envloop_home())
    # A process of a group runs under the lock its group's first process holds.
    lock = try_hold_lock(home) if background and not in_group else None
    if background and not in_group and lock is None:
        note("a background worker is already running for this store")
        return
    # The group's other processes start before this one opens the store and loads the scheduler,
    # the runners and the sandbox, so that they load them side by side with it rather than after
    # it (half a second each). They need only the home and the store's address, both read from
    # the settings; only a local worker has a group, and its size never depends on what loads next.
    shares = capacity_shares(capacity or default_capacity(), processes, executor)
    group = start_group(home, settings().database_url, shares[1:], lease_ttl, environment)
    try:
        ctx = context()
        from envloop.scheduling.executor_choice import choose_executor  # noqa: PLC0415
        from envloop.scheduling.worker import Worker, WorkerConfig  # noqa: PLC0415
        from envloop.services.components import check_environment  # noqa: PLC0415

        chosen, suggested = choose_executor(executor, ray_address)
        check_environment(environment)
        total = capacity or suggested or default_capacity()
        shares = capacity_shares(total, processes, executor)
        config = WorkerConfig(
            capacity=shares[0],
            idle_exit=idle_exit,
            background=background,
            lease_ttl=lease_ttl,
            environment=environment,
        )
        runner = Worker(ctx, config, executor=chosen, lock=lock)
    except BaseException:  # a refused choice or a store out of reach: the group started for it goes too
        if group is not None:
            group.stop()
        raise
    others = plural(len(shares) - 1, "more process", "more processes")
    more = f"; {others}, {plural(total, 'trial')} at once in all" if len(shares) > 1 else ""
    note(f"worker {runner.id} on {ctx.store.url} (capacity {config.capacity}{more})")
    run_worker(runner, lock, group)
    note(f"worker {runner.id} stopped after {plural(runner.completed, 'trial')}")
