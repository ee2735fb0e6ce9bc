"""A real disk quota per instance: its writable directories live on a tmpfs of the trial's size.

RLIMIT_FSIZE only caps one file; a trial could still fill the host's disk with many. When the worker
may mount (it runs as root), each instance root is a fresh tmpfs of exactly the trial's disk limit:
writes past it fail with ENOSPC inside the trial, the host's disk is never touched, and teardown is
one unmount. tmpfs lives in memory: pages a trial writes are charged to its memory cgroup as well,
so a trial's files and its processes share its memory limit (docs/operators/security.md).

Inside the sandbox the bind mounts then name paths on the tmpfs (`/app`), not the host's
directories, so `/proc/self/mountinfo` shows no host path either.
"""

import ctypes
import ctypes.util
import functools
import os
from pathlib import Path

_MNT_DETACH = 2
_FULL_MARGIN_BYTES = 64 * 1024


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def can_mount() -> bool:
    return os.geteuid() == 0


def mount_quota(root: Path, size_mb: int) -> None:
    """Mount a tmpfs of `size_mb` on the existing empty directory `root` (root-owned, 0755)."""
    options = f"size={size_mb}m,mode=0755,nr_inodes={max(4096, size_mb * 256)}".encode()
    if _libc().mount(b"envloop", str(root).encode(), b"tmpfs", 0, options) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"tmpfs mount failed: {os.strerror(errno)}")


def unmount_quota(root: Path) -> bool:
    """Detach the instance's tmpfs (its memory is freed once nothing holds it); False if it was not
    mounted or could not be detached."""
    return bool(_libc().umount2(str(root).encode(), _MNT_DETACH) == 0)


def is_full(root: Path) -> bool:
    """Whether the instance's file system has run out of space or inodes."""
    try:
        info = os.statvfs(root)
    except OSError:
        return False
    return info.f_bavail * info.f_frsize < _FULL_MARGIN_BYTES or info.f_favail == 0
