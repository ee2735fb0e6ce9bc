"""One worker process as `el worker` runs it: its capacity shared with the other processes of its
group, the group started and stopped with it, the signals that stop it, and the background lock
let go before it exits.

A local worker of more trials than one interpreter can drive is a group of processes: this one and
`el worker` processes of its own, one per share of the capacity, each claiming from the same
queue as a worker on another machine would (docs/design/queue-and-leases.md).
"""

import asyncio
import contextlib
import gc
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from envloop.core.capacity import default_processes, split_capacity

if TYPE_CHECKING:
    from envloop.scheduling.background import BackgroundLock
    from envloop.scheduling.pool import WorkerPool
    from envloop.scheduling.worker import Worker


def capacity_shares(total: int, processes: int | None, executor: str) -> list[int]:
    """The trials at once of each process of a worker of `total`, this one's first: split over
    `processes` (default: `default_processes`) with the local executor; one process with another
    executor, which spreads the trials itself."""
    if executor != "local":
        return [total]
    return split_capacity(total, processes or default_processes(total))


def start_group(
    home: Path, database_url: str | None, shares: list[int], lease_ttl: float, environment: str
) -> "WorkerPool | None":
    """The other processes of a worker, one per share of its capacity: each an `el worker` of its
    own on the same home and store (None: the home's SQLite store), stopped with this one (and by
    the kernel if this one is killed)."""
    from envloop.scheduling.pool import WorkerPool, worker_env  # noqa: PLC0415

    if not shares:
        return None
    args = ["--in-group", "--processes", "1", "--lease-ttl", str(lease_ttl), "--environment", environment]
    commands = [[*args, "--capacity", str(share)] for share in shares]
    pool = WorkerPool(commands, worker_env(home, database_url), None)
    pool.start()
    return pool


def run_worker(worker: "Worker", lock: "BackgroundLock | None", group: "WorkerPool | None") -> None:
    """Run `worker` until it stops (SIGINT and SIGTERM stop it, handing its trials back), then stop
    its group. The background lock is let go as the worker stops serving, before asyncio and the
    interpreter wait for threads at exit: from then on a submission starts a worker of its own."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, worker.stop)
        try:
            await worker.run()
        finally:
            if lock is not None:
                lock.release()

    # What the worker loaded to start (modules, schemas, the store's metadata) lives as long as it
    # does: moved out of the collector's reach, a full collection no longer walks its hundred
    # thousand objects (60 ms each time, 0.2 ms of CPU per trivial trial). No collection first: it
    # would cost those 60 ms at every start to free what little start-up leaves in cycles.
    gc.freeze()
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(main())
    finally:
        if group is not None:
            group.stop()
