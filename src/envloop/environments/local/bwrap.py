"""bubblewrap command lines: a private root with only the host's system directories, read-only.

A command sees `/usr`, `/bin`, `/lib*`, `/sbin` and `/etc` from the host, its own `/proc`, `/dev`
and `/tmp`, the instance's app directory at the workdir and its logs at `/logs`; nothing else of the
host (home directories, `/work`, the store, other instances) exists inside. Every namespace is
private; bwrap always runs unprivileged (as the instance's own host uid when the worker is root), so
the sandbox holds no capability at all, and cannot create further user namespaces (userns_filter.py).

Everything bwrap is told (binds, variables) goes through a file descriptor (`--args`), never its
command line: inside the sandbox `/proc/1/cmdline` is bwrap's, and would otherwise show the host's
paths. The trial's variables are set inside only (`--clearenv --setenv`), so nothing a task sets
reaches a process on the host.

A trial with a network gets its own network namespace with user-mode networking (`pasta`): it reaches
the internet through the host's sockets, but not the host's loopback or its other local services,
and no port of the host is forwarded unless the profile's agent needs its model endpoint.
"""

import functools
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from envloop.environments.local.identity import can_switch_user, setpriv_prefix
from envloop.environments.local.userns_filter import userns_filter

SYSTEM_DIRS = ("/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc")
LAUNCH_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
TUN_DEVICE = "/dev/net/tun"
"""pasta opens it inside the trial's network namespace, as the trial's own unprivileged uid."""
"""The only variable a host-side launcher (shell, setpriv, pasta, bwrap) ever sees."""
SANDBOX_HOSTNAME = "sandbox"
_PROBE_TIMEOUT_SEC = 15
_PROBE_UID = 0x7000_0000 - 1


@functools.cache
def system_binds() -> tuple[str, ...]:
    """Read-only binds of the host's system dirs; merged-/usr symlinks are recreated as symlinks.
    Looked at once per process: the host's system directories do not change under a running worker,
    and asking again for every instance cost 50 µs each time."""
    args: list[str] = []
    for directory in SYSTEM_DIRS:
        path = Path(directory)
        if path.is_symlink():
            args += ["--symlink", str(path.readlink()), directory]
        elif path.is_dir():
            args += ["--ro-bind", directory, directory]
    return tuple(args)


def sandbox_args(*, network: bool) -> list[str]:
    """Namespaces, kernel filesystems and system dirs: everything but the instance's binds, the uid
    inside (`--uid`/`--gid`) and the refusal of user namespaces (`userns_refusal`), given per command."""
    args = ["--unshare-all"]
    if network:
        args.append("--share-net")  # the namespace pasta made for this command, not the host's
    args.append("--unshare-user")
    args += ["--hostname", SANDBOX_HOSTNAME, "--die-with-parent", "--new-session"]
    args += ["--proc", "/proc", "--dev", "/dev"]
    return [*args, *system_binds()]


def environment_args(env: Mapping[str, str]) -> list[str]:
    args = ["--clearenv"]
    for name, value in env.items():
        args += ["--setenv", name, value]
    return args


def args_file(args: Iterable[str]) -> int:
    """An in-memory file holding `args` NUL-separated, positioned at its start, for `--args`."""
    return _memory_file("bwrap-args", b"".join(arg.encode() + b"\0" for arg in args))


def userns_refusal() -> tuple[list[str], tuple[int, ...]]:
    """What keeps one command from creating user namespaces, and the descriptors it must inherit:
    the seccomp filter, in a file of its own (bwrap reads it to its end, so no two commands can
    share one), else bwrap's `--disable-userns`."""
    program = userns_filter()
    if program is None:
        return ["--disable-userns"], ()
    fd = _memory_file("userns-filter", program)
    return ["--add-seccomp-fd", str(fd)], (fd,)


def _memory_file(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def pasta_prefix(executable: str, forward_ports: Sequence[int] = (), *, internet: bool = True) -> list[str]:
    """User-mode networking in a namespace of its own: no host port is reachable from inside (the
    gateway is not mapped to the host, no port forwarded) except the given loopback ports, which a
    command reaches on its own loopback. Without `internet` the namespace is left unconfigured:
    loopback alone, with those ports (the model gateway's) and no route anywhere."""
    args = [executable, *(["--config-net"] if internet else []), "--no-map-gw", "--quiet"]
    args += ["-t", "none", "-u", "none", "-U", "none"]
    ports = ",".join(str(p) for p in sorted(set(forward_ports)))
    args += ["-T", ports or "none"]
    return [*args, "--"]


@functools.cache
def pasta_executable() -> tuple[str | None, str]:
    """(path, "") when pasta can give a trial a network here, else (None, why not): a pasta that
    cannot open the tun device would end every networked command at once, read as the agent's
    failure."""
    path = shutil.which("pasta")
    if path is None:
        return None, "pasta (Debian package passt) is not installed"
    problem = _tun_problem()
    if problem:
        return None, problem
    return path, ""


def _tun_problem() -> str:
    try:
        mode = Path(TUN_DEVICE).stat().st_mode
    except OSError:
        return f"{TUN_DEVICE} does not exist here (pasta needs the tun device)"
    # A root worker runs pasta as the instance's own uid, which only the "other" bits can let in.
    usable = (mode & 0o006) == 0o006 if can_switch_user() else os.access(TUN_DEVICE, os.R_OK | os.W_OK)
    if not usable:
        return (
            f"{TUN_DEVICE} is not usable by the trial's uid (mode {mode & 0o777:o}); give it mode 666, "
            "as Debian's udev does (scripts/setup does so)"
        )
    return ""


@functools.cache
def bwrap_executable() -> tuple[str | None, str]:
    """(path, "") when a real sandbox launch works on this host, exactly as trials are launched,
    else (None, why not). Checked once per process: a launch costs a few milliseconds."""
    path = shutil.which("bwrap")
    if path is None:
        return None, "bwrap is not installed"
    prefix = setpriv_prefix(_PROBE_UID) if can_switch_user() else []
    refusal, fds = userns_refusal()
    fd = args_file([*sandbox_args(network=False), *refusal, "--uid", "0", "--gid", "0", "--tmpfs", "/tmp"])
    fds += (fd,)
    probe = [*prefix, path, "--args", str(fd), "--", "/bin/sh", "-c", "exit 0"]
    try:
        done = subprocess.run(
            probe,
            capture_output=True,
            timeout=_PROBE_TIMEOUT_SEC,
            check=False,
            env={"PATH": LAUNCH_PATH},
            cwd="/",
            pass_fds=fds,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bwrap does not start: {exc}"
    finally:
        for open_fd in fds:
            os.close(open_fd)
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip().splitlines()
        return None, f"bwrap cannot create a sandbox here: {reason[-1] if reason else done.returncode}"
    return path, ""
