"""The launcher binary (launcher.c): built once per machine with the system's C compiler, kept in the
worker user's cache under a name that carries its source's digest.

Every trial command starts through it, so it must be exactly the shipped source and writable by no
one but the worker's user: the cache directory is private (0700, owned by that user) and a binary
found there is used only when it is owned by that user and writable by no one else. Without a
compiler the launch falls back to the same steps as a shell prefix and `setpriv`, which keep the
same promises at the cost of two more execs per command. ENVLOOP_LAUNCHER=shell chooses that
fallback explicitly.

It is linked statically where the toolchain can: an exec of a dynamic binary first loads and
relocates its libraries, a fifth of a millisecond per command here, paid twice by every trial. musl
(`musl-gcc`, Debian's musl-tools) comes first: glibc's start-up, static or not, asks the CPU for its
features and cache sizes with some twenty `cpuid` instructions, each of which a virtual machine
answers by leaving the guest; here that was 0.3 ms of CPU per exec, two thirds of the launcher's
whole cost. musl's start-up asks nothing. musl ships no kernel headers, so the system's
(`linux/capability.h`) are searched after musl's own. Without musl, glibc's static library; without
that, linked as usual.
"""

import contextlib
import functools
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from envloop.settings import env_name, settings

SOURCE = Path(__file__).with_name("launcher.c")
LAUNCHER_VARIABLE = env_name("launcher")
_COMPILE_TIMEOUT_SEC = 60.0
MUSL_COMPILER = "musl-gcc"
Build = tuple[str, tuple[str, ...]]
"""A compiler and the flags it links the launcher with."""


def _cache_dir() -> Path:
    """The system's cache for a root worker (shared by every home on the machine), else the user's."""
    if os.geteuid() == 0:
        return Path("/var/cache/envloop")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "envloop"


def _private_to_us(path: Path, *, directory: bool) -> bool:
    """Owned by this process's user, of the expected kind, and writable by no one else."""
    try:
        info = path.lstat()
    except OSError:
        return False
    kind_ok = stat.S_ISDIR(info.st_mode) if directory else stat.S_ISREG(info.st_mode)
    return kind_ok and info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


@functools.cache
def builds() -> tuple[Build, ...]:
    """The ways this machine can build the launcher, best first: musl statically, then the system's
    compiler statically, then dynamically. Its cache name carries them, so a binary built before a
    better way was installed is built again. Only paths are looked up here (every worker asks, the
    binary is nearly always built already): what musl needs more is asked only to build it."""
    found: list[Build] = []
    musl = shutil.which(MUSL_COMPILER)
    if musl is not None:
        found.append((musl, ("-static",)))
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is not None:
        found += [(compiler, ("-static",)), (compiler, ())]
    return tuple(found)


def _kernel_headers(compiler: str) -> tuple[str, ...] | None:
    """Flags that let musl's compiler find the system's kernel headers after its own: Debian keeps
    `asm/` below the target triplet (`/usr/include/x86_64-linux-gnu`). None: no triplet to be had."""
    try:
        done = _run_compiler([compiler, "-print-multiarch"])
    except (OSError, subprocess.SubprocessError):
        return None
    triplet = done.stdout.decode(errors="replace").strip()
    if not triplet or "/" in triplet:
        return None
    return ("-idirafter", "/usr/include", "-idirafter", f"/usr/include/{triplet}")


def _compile(target: Path) -> bool:
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / "envloop-launch"
        if not any(_link(compiler, flags, built) for compiler, flags in builds()):
            return False
        built.chmod(0o755)
        built.replace(target)  # atomic: a concurrent worker sees the old name or the whole file
    return True


def _link(compiler: str, flags: tuple[str, ...], built: Path) -> bool:
    if Path(compiler).name == MUSL_COMPILER:
        headers = _kernel_headers(compiler)
        if headers is None:
            return False
        flags = (*flags, *headers)
    try:
        _run_compiler([compiler, "-O2", "-Wall", *flags, "-o", str(built), str(SOURCE)])
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def _run_compiler(argv: list[str]) -> "subprocess.CompletedProcess[bytes]":
    return subprocess.run(
        argv,
        check=True,
        capture_output=True,
        timeout=_COMPILE_TIMEOUT_SEC,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C"},
    )


@functools.cache
def launcher_binary() -> str | None:
    """The launcher's path, building it on first use; None when the shell fallback is to be used."""
    if settings().launcher == "shell":
        return None
    digest = hashlib.sha256(SOURCE.read_bytes() + repr(builds()).encode()).hexdigest()[:16]
    cache = _cache_dir()
    with contextlib.suppress(OSError):
        cache.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _private_to_us(cache, directory=True):
        return None
    target = cache / f"envloop-launch-{digest}"
    if _private_to_us(target, directory=False):
        return str(target)
    if not _compile(target):
        return None
    return str(target) if _private_to_us(target, directory=False) else None


def launcher_prefix(
    cgroup_procs: list[Path],
    rlimits: list[tuple[str, int]],
    uid: int | None,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """The argv before the program: join, lower, drop, then exec what follows `--`. With `cwd` or
    `env` (a plain-mode command), the program starts there with exactly those variables, looked up
    on their PATH, after the drop."""
    binary = launcher_binary()
    if binary is None:
        raise RuntimeError("the launcher binary is not available")
    args = [binary]
    for path in cgroup_procs:
        args += ["--cgroup", str(path)]
    for name, value in rlimits:
        args += ["--rlimit", f"{name}={value}"]
    if uid is not None:
        args += ["--uid", str(uid)]
    args += ["--parent", str(os.getpid())]  # the command dies with this process, never outlives it
    if cwd is not None:
        args += ["--chdir", cwd]
    for variable, setting in (env or {}).items():
        args += ["--setenv", f"{variable}={setting}"]
    return [*args, "--"]
