"""One cgroup per trial run that all its containers live under, so sidecars share the trial's limits.

A task with sidecars (a database, an API) gets the memory, cpus and pids the task asks for across
all its containers together, not once per container: the daemon places each container of the run
below `envloop-trials/<run>` (its `CgroupParent`), whose own limits envloop writes first. This
holds with the daemon's `cgroupfs` driver on cgroup v1 (each controller its own hierarchy) and v2
(one unified hierarchy); anywhere else each container keeps its own limits and the trial says so.

The run's cgroup lives below one of the worker process that made it (`envloop-trials/<worker>/
<run>`, the worker named by its host's digest, pid and start time): a worker killed mid-trial
cannot remove its runs' cgroups, and the next worker on the host removes those of every worker
that is gone (`sweep_trial_cgroups`), in every hierarchy the daemon made them in.
"""

import contextlib
import hashlib
import os
import re
from pathlib import Path

from envloop.environments.policy import EffectiveLimits
from envloop.liveness import ended, start_time, this_host

_ROOT = Path("/sys/fs/cgroup")
_PARENT = "envloop-trials"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


class TrialCgroup:
    """The parent cgroup of one run's containers (`path` is what the daemon takes)."""

    def __init__(self, run_id: str) -> None:
        self.name = f"{_worker_name()}/{_SAFE.sub('-', run_id)[:100]}"
        self.path = f"/{_PARENT}/{self.name}"
        self._made: list[Path] = []

    def create(self, limits: EffectiveLimits) -> str | None:
        """Make the cgroup with the trial's limits; None when done, else why it could not be."""
        memory = limits.memory_mb * 1024 * 1024
        try:
            if (_ROOT / "cgroup.controllers").is_file():
                self._unified(memory, limits)
            else:
                self._split(memory, limits)
        except OSError as exc:
            self.remove()
            return f"the trial's containers could not share one cgroup ({exc.strerror or exc})"
        return None

    def _split(self, memory: int, limits: EffectiveLimits) -> None:
        values = {
            "memory": [("memory.limit_in_bytes", memory), ("memory.memsw.limit_in_bytes", memory)],
            "pids": [("pids.max", limits.pids)],
            "cpu": [("cpu.cfs_period_us", 100_000)]
            + ([("cpu.cfs_quota_us", int(limits.cpus * 100_000))] if limits.cpus is not None else []),
        }
        for controller, settings in values.items():
            directory = _ROOT / controller / _PARENT / self.name
            if not (_ROOT / controller).is_dir():
                continue
            directory.mkdir(parents=True, exist_ok=True)
            self._made.append(directory)
            for name, value in settings:
                if (directory / name).exists():
                    (directory / name).write_text(str(value))

    def _unified(self, memory: int, limits: EffectiveLimits) -> None:
        directory = _ROOT / _PARENT / self.name
        directory.parent.mkdir(parents=True, exist_ok=True)
        wanted = {"memory", "pids", "cpu"} & set((_ROOT / "cgroup.controllers").read_text().split())
        for ancestor in (_ROOT, directory.parent.parent, directory.parent):
            (ancestor / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in sorted(wanted)))
        directory.mkdir(exist_ok=True)
        self._made.append(directory)
        settings = {"memory.max": str(memory), "memory.swap.max": "0", "pids.max": str(limits.pids)}
        if limits.cpus is not None:
            settings["cpu.max"] = f"{int(limits.cpus * 100_000)} 100000"
        for name, value in settings.items():
            if (directory / name).exists():
                (directory / name).write_text(value)

    def oom_kills(self) -> int:
        """Out-of-memory kills anywhere below the trial's cgroup."""
        for directory in self._made:
            for name, key in (("memory.oom_control", "oom_kill "), ("memory.events", "oom_kill ")):
                with contextlib.suppress(OSError, ValueError):
                    for line in (directory / name).read_text().splitlines():
                        if line.startswith(key):
                            return int(line[len(key) :])
        return 0

    def remove(self) -> list[str]:
        """Remove the cgroup (after its containers); the directories that would not go. On cgroup
        v1 the daemon also made the run's directory in every other hierarchy as it placed the
        containers (freezer, cpuset, blkio, devices...): those go too."""
        if not self._made:
            return []
        made_by_daemon = (hierarchy / _PARENT / self.name for hierarchy in _hierarchies())
        directories = [*self._made, *(path for path in made_by_daemon if path not in self._made)]
        self._made = []
        return [str(directory) for directory in directories if not _remove_tree(directory)]


def _hierarchies() -> list[Path]:
    """The mounted cgroup hierarchies (`_ROOT` itself on cgroup v2)."""
    if (_ROOT / "cgroup.controllers").is_file():
        return [_ROOT]
    with contextlib.suppress(OSError):
        return [entry for entry in _ROOT.iterdir() if entry.is_dir() and not entry.is_symlink()]
    return []


def sweep_trial_cgroups() -> list[str]:
    """Remove, in every hierarchy, the run cgroups of the workers of this host that are gone (with
    their own directory); what was removed, by the worker's name. A cgroup that still holds a
    process stays."""
    removed = []
    own_host = _host_digest(this_host())
    for hierarchy in _hierarchies():
        with contextlib.suppress(OSError):
            for worker in (hierarchy / _PARENT).iterdir():
                host, _, rest = worker.name.partition("-")
                pid, _, started = rest.partition("-")
                if host != own_host or not pid.isdigit() or not started.isdigit() or not worker.is_dir():
                    continue
                if ended(int(pid), float(started)) and _remove_tree(worker):
                    removed.append(f"cgroup {worker.name}")
    return sorted(set(removed))


def _worker_name() -> str:
    """`<host digest>-<pid>-<start time>` of this process: a cgroup's name takes no host name as it
    is (any characters), and the digest is enough to tell this host's workers from others'."""
    return f"{_host_digest(this_host())}-{os.getpid()}-{int(start_time())}"


def _host_digest(host: str) -> str:
    return hashlib.sha256(host.encode()).hexdigest()[:12]


def _remove_tree(directory: Path) -> bool:
    """Remove an empty cgroup tree, deepest first; whether it is gone."""
    for child in sorted((path for path in directory.rglob("*") if path.is_dir()), reverse=True):
        with contextlib.suppress(OSError):
            child.rmdir()
    try:
        directory.rmdir()
    except OSError as exc:
        return isinstance(exc, FileNotFoundError)
    return True
