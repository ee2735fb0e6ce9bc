"""bubblewrap command lines: a private root with only the host's system directories, read-only.

A command sees `/usr`, `/bin`, `/lib*`, `/sbin` and `/etc` from the host, its own `/proc`, `/dev`
and `/tmp`, the instance's app directory at the workdir and its logs at `/logs`; nothing else of the
host (home directories, `/work`, the store, other instances) exists inside. Each namespace is
private, the network too unless the task allows internet access. When bwrap runs as root, the
sandbox keeps only the capabilities a default container has, so "root" inside cannot remount,
trace or load anything on the host.
"""

import functools
import os
import shutil
import subprocess
from pathlib import Path

SYSTEM_DIRS = ("/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc")
# The default capability set of a Docker container: enough for package managers and chown.
CONTAINER_CAPS = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_RAW",
    "CAP_SYS_CHROOT",
    "CAP_MKNOD",
    "CAP_AUDIT_WRITE",
    "CAP_SETFCAP",
)
_PROBE_TIMEOUT_SEC = 15


def system_binds() -> list[str]:
    """Read-only binds of the host's system dirs; merged-/usr symlinks are recreated as symlinks."""
    args: list[str] = []
    for directory in SYSTEM_DIRS:
        path = Path(directory)
        if path.is_symlink():
            args += ["--symlink", str(path.readlink()), directory]
        elif path.is_dir():
            args += ["--ro-bind", directory, directory]
    return args


def base_args(executable: str, *, network: bool) -> list[str]:
    """Everything but the instance's own binds: namespaces, kernel filesystems, system dirs."""
    args = [executable, "--unshare-all"]
    if network:
        args.append("--share-net")
    args += ["--die-with-parent", "--new-session", "--proc", "/proc", "--dev", "/dev"]
    if os.geteuid() == 0:
        args += ["--cap-drop", "ALL"]
        for cap in CONTAINER_CAPS:
            args += ["--cap-add", cap]
    return args + system_binds()


@functools.cache
def bwrap_executable() -> tuple[str | None, str]:
    """(path, "") when a real sandbox launch works on this host, else (None, why not).

    Checked once per process: a launch costs a few milliseconds, too much to repeat per command.
    """
    path = shutil.which("bwrap")
    if path is None:
        return None, "bwrap is not installed"
    probe = [*base_args(path, network=False), "--tmpfs", "/tmp", "--", "/bin/sh", "-c", "exit 0"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=_PROBE_TIMEOUT_SEC, check=False, env={})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bwrap does not start: {exc}"
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip().splitlines()
        return None, f"bwrap cannot create a sandbox here: {reason[-1] if reason else done.returncode}"
    return path, ""
