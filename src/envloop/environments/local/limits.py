"""Resource limits for one instance: rlimits set before each command starts, plus cgroups when writable.

A real cgroup per instance is preferred because it is the only limit that holds for root
(RLIMIT_NPROC is ignored for root) and the only reliable list of every process a trial started,
including daemons that left their session. cgroup v1 controllers (`pids`, `memory`, `cpu`) are used
when this process may create groups below its own; otherwise the instance falls back to rlimits
alone and says so in its note. A group that exists but refuses a limit fails the instance
(`LimitNotSetError`): a trial never runs without a limit its host could have enforced.
"""

import atexit
import contextlib
import functools
import os
import resource
import shlex
import signal
import threading
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from envloop.environments.base import EnvironmentSetupError

CGROUP_ROOT = Path("/sys/fs/cgroup")
_CONTROLLERS = ("pids", "memory", "cpu")
_CPU_PERIOD_US = 100_000
_READ_BYTES = 1 << 16


class Limits(BaseModel):
    """What one instance's cgroups and rlimits enforce (see policy.resolve_limits for where the
    numbers come from); `pids` and `nproc` are the provider's own."""

    model_config = ConfigDict(frozen=True)

    memory_mb: int = Field(default=4096, gt=0)
    storage_mb: int = Field(default=10240, gt=0, description="largest file a command may write")
    pids: int = Field(default=1024, gt=0, description="processes and threads alive at once")
    nproc: int = Field(default=4096, gt=0, description="RLIMIT_NPROC for non-root users")
    cpus: float | None = Field(default=None, gt=0)


@functools.cache
def _cgroup_bases() -> dict[str, Path]:
    """Per controller, the writable directory below this process's own group (checked once)."""
    own: dict[str, str] = {}
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(","):
            own[name] = path
    bases: dict[str, Path] = {}
    for name in _CONTROLLERS:
        mount = CGROUP_ROOT / name
        if name not in own or not (mount / "cgroup.procs").exists():
            continue
        parent = mount / own[name].lstrip("/")
        if not parent.is_dir():
            parent = mount
        if os.access(parent, os.W_OK):
            bases[name] = parent / "envloop"
    return bases


class LimitNotSetError(EnvironmentSetupError):
    """A cgroup this host offers could not take the instance's limit: running the trial anyway
    would run it without that limit, so the instance is not made (an `environment_error`). A host
    offering no cgroup at all is another matter: rlimits stand in, and the instance's note says so."""


def unset_message(controller: str, limits: Limits, problem: str) -> str:
    wanted = {
        "memory": f"memory limit of {limits.memory_mb} MB",
        "pids": f"process limit of {limits.pids}",
        "cpu": f"cpu limit of {limits.cpus:g}" if limits.cpus is not None else "cpu limit",
    }[controller]
    return f"the {wanted} could not be set on the instance's {controller} cgroup ({problem})"


def read_value(path: Path) -> str:
    """The whole text of a kernel file (a cgroup's, /proc's) read with plain descriptor calls. A
    trial reads several at its end (its group's processes, its OOM kills), and `Path.read_text`'s
    buffered text layer cost three to four times the read itself (15 against 4 µs each)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, _READ_BYTES):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode()


def write_value(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
    except OSError:
        return False
    return True


class _GroupPool:
    """Empty groups kept for reuse: creating and removing cgroup v1 directories costs far more than
    rewriting their limits, and a worker runs thousands of instances. A limit is written again only
    when the next instance needs a different value (only a plain-mode command running as root, which
    no sandbox holds, could have changed it meanwhile). Names end in `.<pid>` so groups left behind
    by a worker that was killed can be recognised and swept by the next one.
    """

    def __init__(self) -> None:
        self.free: list[tuple[str, dict[Path, str]]] = []
        self.count = 0
        self.swept = False
        self._lock = threading.Lock()  # instances are made on threads

    def take(self) -> tuple[str, dict[Path, str]]:
        """A group name, and the limits last written to its files (rewritten only when they differ)."""
        with self._lock:
            if not self.swept:
                self.swept = True
                _sweep_dead_groups()
                atexit.register(self.drain)
            if self.free:
                return self.free.pop()
            self.count += 1
            return f"pool-{self.count}.{os.getpid()}", {}

    def give_back(self, group: str, written: dict[Path, str]) -> None:
        with self._lock:
            self.free.append((group, written))

    def drain(self) -> None:
        for group, _ in self.free:
            for base in _cgroup_bases().values():
                remove_dir(base / group)
        self.free.clear()
        for base in _cgroup_bases().values():
            with contextlib.suppress(OSError):
                base.rmdir()


_POOL = _GroupPool()


def _sweep_dead_groups() -> None:
    """Remove the groups of workers that died, killing first whatever their trials left running
    (a stale run must not keep writing while its trial runs again elsewhere)."""
    for base in _cgroup_bases().values():
        if not base.is_dir():
            continue
        for directory in base.iterdir():
            owner = directory.name.rsplit(".", 1)[-1]
            if directory.is_dir() and owner.isdigit() and not Path(f"/proc/{owner}").exists():
                _kill_members(directory)
                remove_dir(directory)


def _kill_members(directory: Path) -> None:
    for _ in range(100):
        try:
            pids = [int(p) for p in read_value(directory / "cgroup.procs").split()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


class GroupMembers:
    """What every instance group offers, v1 (`InstanceCgroups`) or v2 (`cgroup2.UnifiedCgroup`):
    the list of the instance's processes, and the means to kill them all."""

    dirs: list[Path]
    controllers: list[str]

    @property
    def has_memory(self) -> bool:
        return "memory" in self.controllers

    @property
    def tracks_processes(self) -> bool:
        return bool(self.dirs)

    def procs_files(self) -> list[Path]:
        return [d / "cgroup.procs" for d in self.dirs]

    def pids(self) -> list[int]:
        if not self.dirs:
            return []
        try:
            text = read_value(self.dirs[0] / "cgroup.procs")
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def kill_all(self) -> list[int]:
        """SIGKILL every process in the group once; returns those signalled."""
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return pids


class InstanceCgroups(GroupMembers):
    """The cgroups of one instance; every command joins them before it starts (see launch_prefix)."""

    def __init__(self, trial_id: str, limits: Limits, *, enabled: bool = True) -> None:
        self.dirs: list[Path] = []
        self.controllers: list[str] = []
        self.enforced: list[str] = []
        self.trial_id = trial_id
        self._problem = "refused"
        bases = _cgroup_bases() if enabled else {}
        # A group is never shared by two live instances: the pool hands out names this process owns.
        self.group, self._written = _POOL.take() if bases else ("", {})
        for name, base in bases.items():
            if name == "cpu" and limits.cpus is None:
                continue
            directory = base / self.group
            if not directory.is_dir():
                if not self._make(directory):
                    continue
                # A new directory has the kernel's defaults, whatever was written to an earlier one.
                self._written = {p: v for p, v in self._written.items() if p.parent != directory}
            self.dirs.append(directory)
            self.controllers.append(name)
            if not self._configure(name, directory, limits):
                for made in self.dirs:
                    remove_dir(made)
                self.dirs, self.controllers = [], []
                raise LimitNotSetError(unset_message(name, limits, self._problem))

    @staticmethod
    def _make(directory: Path) -> bool:
        # Another instance's teardown may remove the shared parent between the two mkdirs.
        for _ in range(3):
            try:
                directory.parent.mkdir(exist_ok=True)
                directory.mkdir()
            except FileNotFoundError:
                continue
            except OSError:
                return False
            return True
        return False

    def _configure(self, name: str, directory: Path, limits: Limits) -> bool:
        if name == "pids":
            if not self._set(directory / "pids.max", str(limits.pids)):
                return False
            self.enforced.append(f"pids cgroup (max {limits.pids})")
            return True
        if name == "memory":
            if not self._set_memory(directory, limits.memory_mb * 1024 * 1024):
                return False
            self.enforced.append(f"memory cgroup ({limits.memory_mb} MB)")
            return True
        if limits.cpus is None:
            return False
        quota = int(limits.cpus * _CPU_PERIOD_US)
        if not (
            self._set(directory / "cpu.cfs_period_us", str(_CPU_PERIOD_US))
            and self._set(directory / "cpu.cfs_quota_us", str(quota))
        ):
            return False
        self.enforced.append(f"cpu cgroup ({limits.cpus:g} cpus)")
        return True

    def _set_memory(self, directory: Path, limit: int) -> bool:
        """Memory and memory+swap to `limit`, in the order the kernel accepts: it refuses a memory
        limit above the memory+swap limit, and a reused group keeps the last instance's (smaller)
        one, so growing writes memory+swap first and shrinking writes memory first. Without the
        memory+swap limit the group could swap past its limit; not every kernel has it."""
        memory = directory / "memory.limit_in_bytes"
        swap = directory / "memory.memsw.limit_in_bytes"
        if not swap.exists():
            return self._set(memory, str(limit))
        try:
            growing = limit > int(read_value(memory))
        except (OSError, ValueError) as exc:
            self._problem = f"{memory.name} unreadable: {exc}"
            return False
        first, then = (swap, memory) if growing else (memory, swap)
        return self._set(first, str(limit)) and self._set(then, str(limit))

    def _set(self, path: Path, value: str) -> bool:
        if self._written.get(path) == value:
            return True
        try:
            path.write_text(value)
        except OSError as exc:
            self._written.pop(path, None)
            self._problem = f"{path.name}: {exc.strerror or type(exc).__name__}"
            return False
        self._written[path] = value
        return True

    def oom_kills(self) -> int:
        """How many processes the kernel has killed in this group for want of memory so far.

        A pooled group keeps its counter, so callers compare two readings."""
        if "memory" not in self.controllers:
            return 0
        directory = self.dirs[self.controllers.index("memory")]
        try:
            text = read_value(directory / "memory.oom_control")
        except OSError:
            return 0
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0  # kernels before 4.13 do not count OOM kills per group

    def remove(self) -> list[str]:
        """Release the groups (kept empty for reuse); returns the ones still holding processes."""
        if not self.dirs:
            return []
        busy = [str(d) for d in self.dirs if _has_processes(d)]
        if busy:
            failed = [str(d) for d in self.dirs if not remove_dir(d)]
        else:
            failed = []
            _POOL.give_back(self.group, self._written)
        self.dirs = []
        self.controllers = []
        return failed


def _has_processes(directory: Path) -> bool:
    try:
        return bool(read_value(directory / "cgroup.procs").strip())
    except OSError:
        return False


def remove_dir(directory: Path) -> bool:
    try:
        directory.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def rlimits_for(limits: Limits, *, memory_in_cgroup: bool) -> list[tuple[str, int]]:
    """(name, value) pairs, each capped at the current hard limit so a non-root child can set it.

    RLIMIT_AS caps address space, not memory, and breaks runtimes that reserve large virtual
    ranges (Go, the JVM, V8); it is used only when no memory cgroup enforces the real limit.
    """
    wanted = [("RLIMIT_CORE", 0), ("RLIMIT_FSIZE", limits.storage_mb * 1024 * 1024)]
    if not memory_in_cgroup:
        wanted.append(("RLIMIT_AS", limits.memory_mb * 1024 * 1024))
    # Counted per host uid: an instance's own uid when the worker is root (which RLIMIT_NPROC
    # would not limit), the worker's user otherwise.
    wanted.append(("RLIMIT_NPROC", limits.nproc))
    capped = []
    for name, value in wanted:
        hard = resource.getrlimit(getattr(resource, name))[1]
        capped.append((name, value if hard == resource.RLIM_INFINITY else min(value, hard)))
    return capped


def _ulimit(name: str, value: int) -> str:
    # POSIX shells count file sizes in 512-byte blocks and address space in KiB; dash spells the
    # process limit -p where bash says -u.
    if name == "RLIMIT_CORE":
        return f"ulimit -c {value // 512}"
    if name == "RLIMIT_FSIZE":
        return f"ulimit -f {value // 512}"
    if name == "RLIMIT_AS":
        return f"ulimit -v {value // 1024}"
    return f"{{ ulimit -u {value} || ulimit -p {value} || true; }} 2>/dev/null"


def launch_prefix(cgroup_procs: list[Path], rlimits: list[tuple[str, int]]) -> list[str]:
    """A `/bin/sh` prefix that joins the cgroups and lowers the limits, then execs the command.

    Doing this in a tiny shell rather than a Python `preexec_fn` keeps the fork cheap (a Python
    pre-exec hook forces a full fork of this large process, which costs more than the shell) and
    the process is in its cgroups before the command, or anything it forks, starts.
    """
    steps = [f"echo 0 > {shlex.quote(str(path))}" for path in cgroup_procs]
    steps += [_ulimit(name, value) for name, value in rlimits]
    steps.append('exec "$@"')
    return ["/bin/sh", "-c", " && ".join(steps), "envloop-launch"]
