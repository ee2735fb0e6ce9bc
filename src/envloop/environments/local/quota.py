"""A real disk quota per instance: its writable directories live on a tmpfs of the trial's size.

RLIMIT_FSIZE only caps one file; a trial could still fill the host's disk with many. When the worker
may mount (it runs as root), each instance root is a fresh tmpfs of exactly the trial's disk limit:
writes past it fail with ENOSPC inside the trial, the host's disk is never touched, and teardown is
one unmount. tmpfs lives in memory: pages a trial writes are charged to its memory cgroup as well,
so a trial's files and its processes share its memory limit (docs/operators/security.md).

Inside the sandbox the bind mounts then name paths on the tmpfs (`/app`), not the host's
directories, so `/proc/self/mountinfo` shows no host path either.

Each tmpfs names the worker process that mounted it (its source is `envloop:<host>:<pid>:<start
time>`). A worker killed mid-trial cannot unmount its own: the next worker on the host does, from
the mount table, whatever store it serves. A store deleted meanwhile would otherwise leave them
for good, holding their files in memory and lengthening the mount table every sandbox copies.
"""

import ctypes
import functools
import os
import re
from contextlib import suppress
from pathlib import Path

from envloop.liveness import identity_gone, process_identity

_MNT_DETACH = 2
_FULL_MARGIN_BYTES = 64 * 1024
_SOURCE_PREFIX = "envloop:"
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")
_owners: dict[int, str] = {}


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library this process already has loaded: looking it up by name would run
    `ldconfig -p` in a subprocess at every worker's start."""
    return ctypes.CDLL(None, use_errno=True)


def can_mount() -> bool:
    return os.geteuid() == 0


def mount_quota(root: Path, size_mb: int) -> None:
    """Mount a tmpfs of `size_mb` on the existing empty directory `root` (root-owned, 0755)."""
    options = f"size={size_mb}m,mode=0755,nr_inodes={max(4096, size_mb * 256)}".encode()
    source = f"{_SOURCE_PREFIX}{_owner()}".encode()
    if _libc().mount(source, str(root).encode(), b"tmpfs", 0, options) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"tmpfs mount failed: {os.strerror(errno)}")


def unmount_quota(root: Path) -> bool:
    """Detach the instance's tmpfs (its memory is freed once nothing holds it); False if it was not
    mounted or could not be detached."""
    return bool(_libc().umount2(str(root).encode(), _MNT_DETACH) == 0)


def used_bytes(root: Path) -> int | None:
    """What the instance's file system holds, or None when it cannot be told."""
    info = _statvfs(root)
    return None if info is None else (info.f_blocks - info.f_bfree) * info.f_frsize


def is_full(root: Path) -> bool:
    """Whether the instance's file system has run out of space or inodes."""
    info = _statvfs(root)
    return info is not None and (info.f_bavail * info.f_frsize < _FULL_MARGIN_BYTES or info.f_favail == 0)


def _statvfs(root: Path) -> os.statvfs_result | None:
    try:
        return os.statvfs(root)
    except OSError:
        return None


def sweep_leftover_mounts() -> list[str]:
    """Unmount (and remove the mount point of) every instance file system whose worker ran on this
    host and is gone; what was removed, by instance name."""
    removed = []
    for root in _mounts_of_gone_workers():
        if unmount_quota(root):
            with suppress(OSError):
                root.rmdir()
            removed.append(f"instance file system {root.name}")
    return removed


def _owner() -> str:
    """This process's identity, read once per process (a forked child reads its own)."""
    pid = os.getpid()
    if pid not in _owners:
        _owners[pid] = process_identity()
    return _owners[pid]


def _mounts_of_gone_workers() -> list[Path]:
    """Mount points in this process's mount table of tmpfs mounted by a worker that is gone."""
    try:
        table = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return []
    found = []
    for line in table.splitlines():
        fields, _, described = line.partition(" - ")
        mount, kind = fields.split(" "), described.split(" ")
        if len(mount) < 5 or len(kind) < 2 or kind[0] != "tmpfs":
            continue
        source = _unescaped(kind[1])
        if source.startswith(_SOURCE_PREFIX) and identity_gone(source.removeprefix(_SOURCE_PREFIX)):
            found.append(Path(_unescaped(mount[4])))
    return found


def _unescaped(field: str) -> str:
    """A mount table field as it was given: the kernel writes space, tab, newline and backslash as
    three octal digits after a backslash."""
    return _OCTAL_ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), field)
