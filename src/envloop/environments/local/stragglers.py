"""Every process of one local instance, found and killed however the host lets it track them.

A command that ended may have left processes behind (a daemon the agent started, a sandbox still
closing its namespaces). Before the verifier starts and before the instance's files are collected,
all of them must be gone: one left alive could rewrite the reward after the verifier wrote it.
Where the instance has cgroups that list processes, that list is the truth; else its own host uid
finds them (a worker that runs as root gives each instance one); else, in plain mode, the marker
variable every command carries (procs.py). A bwrap command without any of these ends with its pid
namespace, and everything in it.
"""

import asyncio

from envloop.environments.local.cgroup2 import UnifiedCgroup
from envloop.environments.local.limits import InstanceCgroups
from envloop.environments.procs import exits, kill_group, kill_pids, marked_pids, uid_pids, wait_gone

TEARDOWN_KILL_SEC = 10.0
"""How long what an instance left is killed and waited for before its survivors are reported."""
_STRAGGLER_POLL_SEC = 0.005


class InstanceProcesses:
    """The live processes of one instance, by the best means the host gives."""

    def __init__(
        self, cgroups: InstanceCgroups | UnifiedCgroup, host_uid: int | None, run_id: str, *, plain: bool
    ) -> None:
        self._cgroups = cgroups
        self._host_uid = host_uid
        self._run_id = run_id
        self._plain = plain

    def pids(self) -> list[int]:
        """Its cgroup's list, else by its own host uid, else (plain mode) by the marker variable."""
        if self._cgroups.tracks_processes:
            return self._cgroups.pids()
        if self._host_uid is not None:
            return uid_pids(self._host_uid)
        return marked_pids(self._run_id) if self._plain else []

    def kill_tree(self, pgid: int) -> None:
        """Kill a command's process group and everything else the instance runs."""
        kill_group(pgid)
        if self._cgroups.tracks_processes:
            self._cgroups.kill_all()
        else:
            kill_pids(self.pids())

    async def kill_all(self) -> list[str]:
        """Kill whatever the instance still has and wait until it is gone; returns survivors."""
        if self._cgroups.tracks_processes:
            return await self._kill_listed()
        # A scan by uid or marker misses a process caught in the middle of an exec (its environment
        # is unreadable for that moment): only two empty scans in a row mean nothing is left.
        deadline = asyncio.get_running_loop().time() + TEARDOWN_KILL_SEC
        empty_scans = 0
        while empty_scans < 2:
            stragglers = self.pids()
            if not stragglers:
                empty_scans += 1
                continue
            if asyncio.get_running_loop().time() > deadline:
                return [f"process {pid} survived teardown" for pid in stragglers]
            empty_scans = 0
            kill_pids(stragglers)
            left = await wait_gone(stragglers, timeout=TEARDOWN_KILL_SEC)
            if left:
                return [f"process {pid} survived teardown" for pid in left]
        return []

    async def _kill_listed(self) -> list[str]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TEARDOWN_KILL_SEC
        signalled: list[int] = []
        while pids := self._cgroups.kill_all():
            if loop.time() > deadline:
                return [f"processes {self._cgroups.pids()} survived teardown"]
            # Most often a command's sandbox still closing its namespaces after it reported the
            # command's exit: awaited as it ends, not polled. The same processes listed again have
            # ended but are still listed (a zombie no one collected yet): polled.
            if pids == signalled:
                await asyncio.sleep(_STRAGGLER_POLL_SEC)
            else:
                await exits(pids, timeout=_STRAGGLER_POLL_SEC)
            signalled = pids
        return []
