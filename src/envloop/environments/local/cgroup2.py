"""cgroup v2 groups for an instance, on hosts whose controllers live in the unified hierarchy.

Most current distributions mount only cgroup v2. There one group per instance holds every process
it starts (whether or not any controller is available, the group's `cgroup.procs` lists them and
`cgroup.kill` ends them all), and each controller the worker may enable below its own group
(`pids`, `memory`, `cpu`) sets its limit. A controller v2 does not delegate to the worker (its own
group has processes, or the host keeps it) is named in the instance's note as not enforced, so a
limit is never silently weaker than it says; a controller that is enabled but refuses the limit
fails the instance (`LimitNotSetError`).

The interface is that of `limits.InstanceCgroups` (v1), which the local environment uses through
`instance_cgroups`.
"""

import contextlib
import functools
import os
from pathlib import Path

from envloop.environments.local.limits import (
    GroupMembers,
    InstanceCgroups,
    LimitNotSetError,
    Limits,
    read_value,
    remove_dir,
    unset_message,
    write_value,
)
from envloop.settings import settings

UNIFIED_CANDIDATES = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))
_CONTROLLERS = ("pids", "memory", "cpu")
_CPU_PERIOD_US = 100_000


def unified_root() -> Path | None:
    """Where the v2 hierarchy is mounted, if it is (ENVLOOP_CGROUP2_ROOT names another mount)."""
    override = settings().cgroup2_root
    for root in (override,) if override else UNIFIED_CANDIDATES:
        if (root / "cgroup.controllers").is_file():
            return root
    return None


@functools.cache
def _base(root: Path) -> tuple[Path | None, frozenset[str]]:
    """The directory below this process's own v2 group where instance groups go, and the
    controllers instance groups get there (checked once per process and root)."""
    try:
        own = next(
            line.split("::", 1)[1]
            for line in Path("/proc/self/cgroup").read_text().splitlines()
            if line.startswith("0::")
        )
    except (OSError, StopIteration):
        return None, frozenset()
    parent = root / own.strip().lstrip("/")
    base = parent / "envloop"
    try:
        base.mkdir(exist_ok=True)
    except OSError:
        return None, frozenset()
    for directory in (parent, base):
        for name in _CONTROLLERS:
            with contextlib.suppress(OSError):  # EBUSY: the group has processes; ENOENT: not offered
                (directory / "cgroup.subtree_control").write_text(f"+{name}")
    try:
        enabled = frozenset((base / "cgroup.subtree_control").read_text().split())
    except OSError:
        enabled = frozenset()
    return base, enabled & frozenset(_CONTROLLERS)


class UnifiedCgroup(GroupMembers):
    """One instance's v2 group. Limits are set where a controller is enabled; processes are always
    tracked."""

    def __init__(self, run_id: str, limits: Limits, root: Path) -> None:
        self.dirs: list[Path] = []
        self.controllers: list[str] = []
        self.enforced: list[str] = []
        self.unenforced: list[str] = []
        base, available = _base(root)
        if base is None:
            return
        directory = base / f"{run_id}.{os.getpid()}"
        try:
            directory.mkdir()
        except FileExistsError:
            _kill_and_remove(directory)
            directory.mkdir()
        except OSError:
            return
        self.dirs = [directory]
        wanted = {"pids": str(limits.pids), "memory": str(limits.memory_mb * 1024 * 1024)}
        if limits.cpus is not None:
            wanted["cpu"] = f"{int(limits.cpus * _CPU_PERIOD_US)} {_CPU_PERIOD_US}"
        files = {"pids": "pids.max", "memory": "memory.max", "cpu": "cpu.max"}
        for name, value in wanted.items():
            if name not in available:
                self.unenforced.append(name)
                continue
            try:
                (directory / files[name]).write_text(value)
            except OSError as exc:
                _kill_and_remove(directory)
                self.dirs = []
                problem = f"{files[name]}: {exc.strerror or type(exc).__name__}"
                raise LimitNotSetError(unset_message(name, limits, problem)) from None
            self.controllers.append(name)
            if name == "memory":
                write_value(directory / "memory.swap.max", "0")
            self.enforced.append(f"{name} cgroup v2 ({value})")

    def kill_all(self) -> list[int]:
        """SIGKILL every process in the group (cgroup.kill where the kernel has it); returns those
        there were."""
        pids = self.pids()
        if pids and not write_value(self.dirs[0] / "cgroup.kill", "1"):
            super().kill_all()
        return pids

    def oom_kills(self) -> int:
        if not self.has_memory:
            return 0
        try:
            text = read_value(self.dirs[0] / "memory.events")
        except OSError:
            return 0
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def remove(self) -> list[str]:
        failed = [str(d) for d in self.dirs if not remove_dir(d)]
        self.dirs = []
        self.controllers = []
        return failed


def _kill_and_remove(directory: Path) -> None:
    """A group left by an earlier process with the same pid: what it holds is killed first."""
    write_value(directory / "cgroup.kill", "1")
    remove_dir(directory)


def instance_cgroups(run_id: str, limits: Limits, *, enabled: bool) -> InstanceCgroups | UnifiedCgroup:
    """v1 groups where the host has writable v1 controllers, else one v2 group; an operator who
    names a v2 mount (ENVLOOP_CGROUP2_ROOT) gets v2 there."""
    root = unified_root()
    if enabled and root is not None and settings().cgroup2_root:
        return UnifiedCgroup(run_id, limits, root)
    groups = InstanceCgroups(run_id, limits, enabled=enabled)
    if groups.tracks_processes or not enabled or root is None:
        return groups
    return UnifiedCgroup(run_id, limits, root)
