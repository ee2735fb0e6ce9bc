"""How one command of a trial is started on the host, and the host files it writes safely.

Nothing a task or agent controls reaches a process that runs on the host: the launcher (native.py's
binary, which joins the instance's cgroups, lowers its rlimits and drops to its host uid in one exec;
or, without a C compiler, a tiny shell and `setpriv` doing the same), `pasta` and bwrap run with
one fixed variable (`PATH`) in `/`, a directory no trial can write. The trial's variables and working
directory are applied only at the last step: inside the sandbox by bwrap, or in plain mode by the
launcher itself (the fallback: `env`), after the drop to the instance's host uid.
"""

import contextlib
import errno
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from envloop.environments.local.bwrap import LAUNCH_PATH, args_file, environment_args, userns_refusal
from envloop.environments.local.identity import setpriv_prefix
from envloop.environments.local.limits import launch_prefix
from envloop.environments.local.native import launcher_binary, launcher_prefix

LAUNCH_ENV = {"PATH": LAUNCH_PATH}
"""No locale: `env` and `setpriv` would load one from files at every command (some thirty opens),
only for their own error messages; the trial's command gets the task's LANG from its variables."""
LAUNCH_CWD = "/"


@dataclass(frozen=True)
class Launcher:
    """The fixed part of every command line of one instance."""

    cgroup_procs: list[Path]
    rlimits: list[tuple[str, int]]
    host_uid: int | None
    bwrap: str | None
    """bwrap's path in sandbox mode; None in plain mode."""
    sandbox_args: list[str]
    pasta: list[str] | None
    """The pasta prefix when the instance has a network of its own."""

    def argv(
        self, command: Sequence[str], env: Mapping[str, str], cwd: str, binds: Sequence[str]
    ) -> tuple[list[str], tuple[int, ...]]:
        """The host command line, and the file descriptors the child must inherit (what bwrap reads:
        its args, the seccomp filter), which the caller closes once it has started."""
        if launcher_binary() is not None and self.bwrap is None:
            # The launcher itself applies the directory and variables after the drop (no `env`).
            prefix = launcher_prefix(self.cgroup_procs, self.rlimits, self.host_uid, cwd=cwd, env=env)
            return [*prefix, *command], ()
        if launcher_binary() is not None:
            prefix = launcher_prefix(self.cgroup_procs, self.rlimits, self.host_uid)
        else:
            prefix = launch_prefix(self.cgroup_procs, self.rlimits)
            if self.host_uid is not None:
                prefix += setpriv_prefix(self.host_uid)
        if self.bwrap is None:
            assignments = [f"{name}={value}" for name, value in env.items()]
            return [*prefix, "/usr/bin/env", "-i", "-C", cwd, "--", *assignments, *command], ()
        refusal, fds = userns_refusal()
        fd = args_file([*self.sandbox_args, *refusal, *binds, "--chdir", cwd, *environment_args(env)])
        network = [*self.pasta] if self.pasta is not None else []
        return [*prefix, *network, self.bwrap, "--args", str(fd), "--", *command], (*fds, fd)


def open_capture(root: Path, path: Path) -> BinaryIO:
    """Create (or truncate) the capture file `path` below `root`, never through a link.

    Capture files live in directories the trial can write to; a link planted there
    (`logs/agent -> /etc`) must not make the worker write a host file. Each component is opened
    relative to its parent with O_NOFOLLOW, and whatever stood at the file's name is replaced. A
    path outside `root` is the caller's own and opened as it is."""
    if not path.is_relative_to(root):  # the caller's own file, which no trial can reach
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("w+b", buffering=0)
    relative = path.relative_to(root)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for part in relative.parent.parts:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
        with contextlib.suppress(FileNotFoundError):
            os.unlink(relative.name, dir_fd=fd)
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        file_fd = os.open(relative.name, flags, 0o644, dir_fd=fd)
    finally:
        os.close(fd)
    return os.fdopen(file_fd, "w+b", buffering=0)


def read_inside(root: Path, path: Path, max_bytes: int) -> bytes | None:
    """The first `max_bytes` of the regular file `path` below `root`, never through a link (a
    command may have replaced any part of the path by one); None when it does not exist, OSError
    when it is not a regular file or cannot be read."""
    relative = path.relative_to(root)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for part in relative.parent.parts:
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
        file_fd = os.open(relative.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    except FileNotFoundError:
        return None
    finally:
        os.close(fd)
    with os.fdopen(file_fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(file_fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return handle.read(max_bytes)
