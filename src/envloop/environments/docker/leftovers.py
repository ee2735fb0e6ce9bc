"""Ending every process a phase left in a running container, without stopping the container.

Between the agent and the verifier nothing the agent started may run on (a leftover process could
rewrite the reward after the verifier wrote it). Killing the container and starting it again does
that, at two-thirds of a second per trial. Where the worker runs as root beside the daemon, the
same guarantee costs a look at its processes, and where any is left a pause and an unpause: the
container is frozen (its cgroup freezer: a frozen
process can neither fork nor exit, so the list of its processes cannot change while it is read),
every process in its PID namespace but its own two is sent SIGKILL from the host, and it is thawed;
a killed process never runs another instruction of its own. Its own two are `docker-init` (PID 1)
and the command envloop gave it to stay up (`KEEP_UP`, the first child PID 1 started).

A container whose image has an ENTRYPOINT (it may start the task's services, which a restart
starts again), one with a command of its own (a sidecar), or one this process cannot see (a daemon
elsewhere, a worker that is not root) is not handled here: the caller stops and restarts it.
"""

import asyncio
import os
import signal
import time
from contextlib import suppress
from pathlib import Path

from envloop.environments.docker.cli import DockerError
from envloop.environments.docker.engine import NotFoundError, engine
from envloop.environments.shielded import finish_even_if_cancelled

KEEP_UP = ["sh", "-c", "sleep infinity"]
"""The container's command when the caller names none: it keeps the container up between commands."""
_GONE_WAIT_SEC = 5.0
_PAUSE_ATTEMPTS = 4

Process = tuple[int, int]
"""(host PID, start time in clock ticks): a PID alone may be reused once its process is gone."""


async def end_leftovers(container_id: str) -> bool:
    """Kill every process in the running container but its own two and wait until they are gone.
    False when that cannot be done here (the caller stops the container instead)."""
    api = engine()
    inspected = await api.json("GET", f"/containers/{container_id}/json")
    state, config = inspected.get("State") or {}, inspected.get("Config") or {}
    if not state.get("Running") or state.get("Paused"):
        return False
    if config.get("Entrypoint") or config.get("Cmd") != KEEP_UP:
        return False
    init = int(state.get("Pid") or 0)
    if init <= 0 or not await asyncio.to_thread(_belongs, init, container_id):
        return False
    if await asyncio.to_thread(_only_own_left, init):
        return True
    if not await _paused(container_id):
        return False
    try:
        killed = await asyncio.to_thread(_kill_all_but_own, init)
    finally:
        await finish_even_if_cancelled(api.request("POST", f"/containers/{container_id}/unpause"))
    return killed is not None and await _gone(killed)


async def kill_marked(container_id: str, marker: str) -> bool:
    """Kill, from the host, every process of the running container whose environment holds
    `marker` (`NAME=value`: one exec's processes), stopping each before killing it and looking
    again until none is left, so none of the container's programs (which a root agent may have
    replaced) runs for it. False when this process cannot see the container's processes (the
    caller kills them from inside)."""
    inspected = await engine().json("GET", f"/containers/{container_id}/json")
    state = inspected.get("State") or {}
    init = int(state.get("Pid") or 0)
    if not state.get("Running") or init <= 0 or not await asyncio.to_thread(_belongs, init, container_id):
        return False
    wanted = marker.encode()
    deadline = time.monotonic() + _GONE_WAIT_SEC
    while pids := await asyncio.to_thread(_marked, init, wanted):
        for sent in (signal.SIGSTOP, signal.SIGKILL):
            for pid in pids:
                with suppress(ProcessLookupError):
                    os.kill(pid, sent)
        if time.monotonic() > deadline:
            return True  # what still forks past this is the container's stop to end
        await asyncio.sleep(0.005)
    return True


def _marked(init: int, marker: bytes) -> list[int]:
    """Live processes in the PID namespace of `init` whose environment holds `marker`."""
    try:
        members = _namespace_members(init)
    except OSError:
        return []
    found = []
    for pid, (state, _, _) in members.items():
        if pid == init or state in ("Z", "X"):
            continue
        with suppress(OSError):
            if marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                found.append(pid)
    return found


async def _paused(container_id: str) -> bool:
    """Pause the container, trying again a few times: a process that keeps forking can outrun the
    freezer ("unable to freeze"), more often on a busy machine, and the fall-back costs a restart.
    A container that is gone is not tried again."""
    for attempt in range(_PAUSE_ATTEMPTS):
        try:
            await engine().request("POST", f"/containers/{container_id}/pause")
        except NotFoundError:
            return False
        except DockerError:
            await asyncio.sleep(0.05 * (attempt + 1))
        else:
            return True
    return False


def _belongs(pid: int, container_id: str) -> bool:
    """Whether host PID `pid` is the container's (its cgroup names the container), so a PID the
    daemon reports from another PID namespace is never signalled here."""
    try:
        return container_id in Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return False


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent PID, start time) of a process, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the name before it may hold spaces and ')'
    return fields[0], int(fields[1]), int(fields[19])


def _namespace_members(init: int) -> dict[int, tuple[str, int, int]]:
    """Every process in the PID namespace of `init`, with its state, parent and start time."""
    namespace = Path(f"/proc/{init}/ns/pid").readlink()
    members = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with suppress(OSError):
            if (entry / "ns" / "pid").readlink() != namespace:
                continue
            if (found := _stat(int(entry.name))) is not None:
                members[int(entry.name)] = found
    return members


def _others(init: int) -> dict[int, int] | None:
    """Every live process in the namespace but `init` and the first child it started (the keep-up
    command) with that child's own children, by PID with its start time; None when that child is
    not there or has ended and not yet been reaped (the caller stops the container). A zombie has
    ended: it is not counted."""
    try:
        members = _namespace_members(init)
    except OSError:
        return None
    children = [(start, pid) for pid, (_, parent, start) in members.items() if parent == init]
    if init not in members or not children:
        return None
    if members[min(children)[1]][0] in ("Z", "X"):
        return None  # the keep-up command was killed: the container is about to stop on its own
    own = {init, min(children)[1]}
    grown = True
    while grown:  # the keep-up command's own children (`sh` may run `sleep` as one)
        before = len(own)
        own |= {pid for pid, (_, parent, _) in members.items() if parent in own - {init}}
        grown = len(own) > before
    return {
        pid: start for pid, (state, _, start) in members.items() if pid not in own and state not in ("Z", "X")
    }


def _only_own_left(init: int) -> bool:
    """Whether nothing but the container's own processes is left (the common case: the phase's
    commands all ended). Then nothing is there that could start another process, so nothing needs
    freezing: only envloop starts processes in the container from outside (`docker exec`)."""
    return _others(init) == {}


def _kill_all_but_own(init: int) -> list[Process] | None:
    """While the container is frozen: SIGKILL to every process but its own; None when its own
    keep-up command is not there (the caller stops the container)."""
    others = _others(init)
    if others is None:
        return None
    killed = []
    for pid, start in others.items():
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed.append((pid, start))
    return killed


async def _gone(killed: list[Process]) -> bool:
    """Wait until every killed process has exited (a zombie has: it holds nothing and runs nothing)."""
    deadline = time.monotonic() + _GONE_WAIT_SEC
    waiting = list(killed)
    while waiting:
        waiting = [(pid, start) for pid, start in waiting if _alive(pid, start)]
        if not waiting:
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True


def _alive(pid: int, start: int) -> bool:
    found = _stat(pid)
    return found is not None and found[2] == start and found[0] not in ("Z", "X")
