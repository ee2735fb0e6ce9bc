"""How many trials a worker runs at once, in how many processes, and how long it holds them
without a word, when nobody chose: light to import, for the CLI's options."""

import os

from envloop.settings import env_name

CAPACITY_ENV = env_name("worker_capacity")
"""Trials at once for a worker started without `--capacity` (`el worker`, the one `el job submit`
starts, `el serve`'s); unset: max(2, cores)."""

PROCESSES_ENV = env_name("worker_processes")
"""Processes that share a local worker's capacity when `--processes` is not given; unset: see
`default_processes`."""

LEASE_TTL_SEC = 30.0
"""How long a worker's trials stay its own after its last renewal: past it, a worker that went
silent (stalled, or on another host and unreachable) loses them to the queue."""

TRIALS_PER_PROCESS = 2
"""A worker process keeps at least this many trials going, so that one trial's waits (a sandbox
starting, a model answering) overlap another's Python."""


def default_capacity() -> int:
    """Trials at once when nobody chose: every core busy, and at least two."""
    return max(2, os.cpu_count() or 2)


def default_processes(capacity: int) -> int:
    """Processes for a local worker of `capacity` when nobody chose. One process's Python (the
    runner, the store, the SDKs) runs on one core at a time; with more trials than one process can
    drive, a process per core lets the others' Python run too — but never fewer than
    TRIALS_PER_PROCESS trials in a process."""
    return max(1, min(os.cpu_count() or 1, capacity // TRIALS_PER_PROCESS))


def split_capacity(capacity: int, processes: int) -> list[int]:
    """`capacity` trials over `processes` processes as evenly as it goes (none left empty):
    split_capacity(5, 2) == [3, 2]."""
    processes = max(1, min(processes, capacity))
    share, extra = divmod(capacity, processes)
    return [share + (1 if index < extra else 0) for index in range(processes)]
