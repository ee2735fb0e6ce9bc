"""Finding and killing a trial's processes, and reading the tail of captured output.

In plain mode every command of a trial carries `ENVLOOP_RUN_ID=<run id>` in its environment. When no
cgroup lists the trial's processes, that marker in `/proc/<pid>/environ` is how daemons that escaped
their process group (setsid, double fork) are still found; a process that scrubs its own environment
can evade it, which is one reason plain mode is no sandbox. (In bwrap mode each command has its own
pid namespace, which ends with it.)
"""

import asyncio
import contextlib
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from envloop.environments.base import OUTPUT_TAIL_BYTES

MARKER_VARIABLE = "ENVLOOP_RUN_ID"
_POLL_SEC = 0.005
"""How often `/proc` is looked at for exits where the kernel has no pidfds."""


def marked_pids(value: str, variable: str = MARKER_VARIABLE) -> list[int]:
    """Live (non-zombie) processes whose environment carries `variable=value` (by default, a plain
    run's marker)."""
    marker = f"{variable}={value}".encode()
    me = os.getpid()
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0") and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def uid_pids(uid: int) -> list[int]:
    """Live processes whose real uid is `uid`: with a host uid per instance, exactly its processes,
    wherever they went (another session, a scrubbed environment)."""
    wanted = f"Uid:\t{uid}\t"
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
        except OSError:
            continue
        if wanted in status and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """True unless the process is gone or a zombie (a zombie holds no resources and cannot run)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def wait_gone(pids: list[int], *, timeout: float = 5.0) -> list[int]:
    """Wait until the given processes have exited; returns those still alive at the deadline."""
    await exits([p for p in pids if _alive(p)], timeout=timeout)
    return [p for p in pids if _alive(p)]


async def exits(pids: Sequence[int], *, timeout: float) -> None:
    """Until each of `pids` has exited, or `timeout` has passed, seen through pidfds: the wait is
    as long as the exit, never a polling interval. A process already gone, or ended and not yet
    collected, counts as exited; where the kernel has no pidfds `/proc` is polled instead."""
    watched: list[int] = []
    try:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                watched.append(os.pidfd_open(pid))
    except (AttributeError, OSError):  # no pidfds here (a kernel before 5.3)
        for fd in watched:
            os.close(fd)
        await _polled_exits(pids, timeout)
        return
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await pidfds_readable(watched)
    finally:
        for fd in watched:
            os.close(fd)


async def _polled_exits(pids: Sequence[int], timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    remaining = [p for p in pids if _alive(p)]
    while remaining and loop.time() < deadline:
        await asyncio.sleep(min(_POLL_SEC, max(0.0, deadline - loop.time())))
        remaining = [p for p in remaining if _alive(p)]


async def pidfds_readable(pidfds: Sequence[int]) -> None:
    """Until every one of these pidfds is readable, that is until each of their processes has
    ended, seen by the event loop itself (no thread, no polling)."""
    loop = asyncio.get_running_loop()
    pending = set(pidfds)
    all_ended = loop.create_future()

    def ended(fd: int) -> None:
        loop.remove_reader(fd)
        pending.discard(fd)
        if not pending and not all_ended.done():
            all_ended.set_result(None)

    try:
        for fd in pidfds:
            loop.add_reader(fd, ended, fd)
        if pending:
            await all_ended
    finally:
        for fd in pidfds:
            loop.remove_reader(fd)


def read_tail(capture: BinaryIO, limit: int = OUTPUT_TAIL_BYTES) -> tuple[str, bool]:
    """The last `limit` bytes of an open capture file, decoded leniently (output is not always
    UTF-8), and whether that is the whole file. Whatever this process wrote is flushed first."""
    capture.flush()
    size = os.fstat(capture.fileno()).st_size
    if size == 0:
        return "", True
    start = max(0, size - limit)
    capture.seek(start)
    return capture.read(size - start).decode("utf-8", errors="replace"), size <= limit
