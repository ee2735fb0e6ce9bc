"""The launcher every trial command starts through: the native binary (one exec) and its shell and
`setpriv` fallback keep the same promises, and a binary someone else could have written is never
run."""

import asyncio
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from envloop.environments import LocalEnvironmentProvider
from envloop.environments.local import native
from envloop.environments.local.bwrap import bwrap_executable
from envloop.environments.local.identity import can_switch_user
from envloop.tasks.harbor import load_harbor_task
from tests.conftest import process_alive, wait_for
from tests.test_containment import compile_library, preload_library, spec_for, write_task

pytestmark = pytest.mark.skipif(
    bwrap_executable()[0] is None, reason="bwrap cannot create a sandbox on this host"
)
needs_compiler = pytest.mark.skipif(
    shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler on this host"
)

PROBE = (
    "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status; id -u; id -G; "
    "echo fsize=$(ulimit -f); echo core=$(ulimit -c)"
)


@pytest.fixture
def launcher(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """`native` or `shell`, chosen for this test only (the choice is cached per process)."""
    choice: str = request.param
    if choice == "shell":
        monkeypatch.setenv(native.LAUNCHER_VARIABLE, "shell")
    else:
        monkeypatch.delenv(native.LAUNCHER_VARIABLE, raising=False)
    native.launcher_binary.cache_clear()
    yield choice
    native.launcher_binary.cache_clear()


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    cache = tmp_path / "cache"
    monkeypatch.setattr(native, "_cache_dir", lambda: cache)
    native.launcher_binary.cache_clear()
    yield cache
    native.launcher_binary.cache_clear()


async def _probe(tmp_path: Path) -> tuple[str, dict[Path, bool], list[str]]:
    """What a command sees of itself; for each cgroup of the instance, whether a command was seen in
    it while running; and the host command line."""
    provider = LocalEnvironmentProvider("bwrap")
    task_dir = write_task(tmp_path / "task", toml="[environment]\nstorage_mb = 64\n")
    spec = spec_for(tmp_path, task_dir, "true")
    async with provider.instance(load_harbor_task(task_dir), spec) as environment:
        groups: dict[Path, bool] = dict.fromkeys(environment._cgroups.dirs, False)  # type: ignore[attr-defined]
        running = asyncio.create_task(environment.exec(["sh", "-c", PROBE + "; sleep 2"]))
        for _ in range(400):
            for group, seen in list(groups.items()):
                groups[group] = seen or bool((group / "cgroup.procs").read_text().strip())
            if all(groups.values()) or running.done():
                break
            await asyncio.sleep(0.01)
        result = await running
        argv, fds = environment._launcher.argv(["true"], {}, "/", [])  # type: ignore[attr-defined]
        for fd in fds:
            os.close(fd)
    assert result.exit_code == 0, result.stderr
    return result.stdout, groups, argv


@pytest.mark.parametrize("launcher", ["native", "shell"], indirect=True)
def test_both_launchers_drop_every_privilege_and_apply_every_limit(tmp_path: Path, launcher: str) -> None:
    if launcher == "native" and native.launcher_binary() is None:
        pytest.skip("no C compiler: the native launcher cannot be built here")
    seen, groups, argv = asyncio.run(_probe(tmp_path))
    if launcher == "native":
        assert argv[0] == native.launcher_binary()
        assert "/bin/sh" not in argv and "/usr/bin/setpriv" not in argv
    else:
        assert argv[:2] == ["/bin/sh", "-c"] and "/usr/bin/setpriv" in argv
    for capability_set in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert f"{capability_set}:\t0000000000000000" in seen
    assert "fsize=131072" in seen  # 64 MB in 512-byte blocks
    assert "core=0" in seen
    if can_switch_user():
        # The sandbox maps the instance's host uid to the agent's uid; its groups are its own only.
        assert "\n1000\n1000\n" in seen
    assert groups or not can_switch_user()  # a root worker has cgroups here
    assert all(groups.values()), groups  # every command joins every cgroup of its instance


@needs_compiler
def test_the_native_launcher_is_built_once_into_a_private_cache(private_cache: Path) -> None:
    binary = native.launcher_binary()
    assert binary is not None and Path(binary).parent == private_cache
    info = Path(binary).stat()
    assert info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    assert not private_cache.stat().st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    built_at = info.st_mtime_ns
    native.launcher_binary.cache_clear()
    assert native.launcher_binary() == binary and Path(binary).stat().st_mtime_ns == built_at


@needs_compiler
def test_a_launcher_someone_else_could_write_is_rebuilt_not_run(private_cache: Path) -> None:
    private_cache.mkdir(mode=0o700)
    native.launcher_binary()
    binary = Path(str(native.launcher_binary()))
    planted = '#!/bin/sh\ntouch /tmp/envloop-planted-launcher\nexec "$@"\n'
    binary.write_text(planted)
    binary.chmod(0o777)  # writable by anyone: it cannot be trusted whatever it holds
    native.launcher_binary.cache_clear()
    assert native.launcher_binary() == str(binary)
    assert binary.read_bytes().startswith(b"\x7fELF")
    assert not binary.stat().st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _program_interpreter(binary: Path) -> bool:
    """Whether the 64-bit little-endian ELF `binary` names a program interpreter (PT_INTERP): a
    dynamically linked executable does, a static one does not."""
    data = binary.read_bytes()
    assert data[:6] == b"\x7fELF\x02\x01", "not a 64-bit little-endian ELF"
    table, entry_size, entries = (
        int.from_bytes(data[0x20:0x28], "little"),
        int.from_bytes(data[0x36:0x38], "little"),
        int.from_bytes(data[0x38:0x3A], "little"),
    )
    kinds = [
        int.from_bytes(data[table + i * entry_size : table + i * entry_size + 4], "little")
        for i in range(entries)
    ]
    return 3 in kinds


@needs_compiler
def test_the_launcher_is_linked_statically_where_the_toolchain_can(
    private_cache: Path, tmp_path: Path
) -> None:
    """No dynamic loader runs before each trial command where a static link is possible."""
    probe = tmp_path / "probe.c"
    probe.write_text("int main(void) { return 0; }\n")
    compilers = [shutil.which(native.MUSL_COMPILER), shutil.which("cc") or shutil.which("gcc")]
    probe_static = [*("-static", "-o", str(tmp_path / "probe")), str(probe)]
    static_possible = any(
        subprocess.run([compiler, *probe_static], check=False).returncode == 0
        for compiler in compilers
        if compiler is not None
    )
    binary = native.launcher_binary()
    assert binary is not None
    assert _program_interpreter(Path(binary)) is not static_possible
    assert _program_interpreter(Path("/bin/sh").resolve())  # the check tells a dynamic binary apart


@pytest.mark.skipif(
    shutil.which(native.MUSL_COMPILER) is None, reason="musl-gcc is not installed (scripts/setup installs it)"
)
def test_the_launcher_is_built_on_musl_where_it_is_installed(private_cache: Path) -> None:
    """glibc's start-up asks the CPU for its features by `cpuid`, slow in a virtual machine, before
    every trial command; musl's asks nothing. The launcher still keeps every promise (the tests
    around it run whichever binary was built)."""
    binary = native.launcher_binary()
    assert binary is not None
    contents = Path(binary).read_bytes()
    assert not _program_interpreter(Path(binary))
    assert b"GNU C Library" not in contents and b"GLIBC" not in contents
    assert native.builds()[0][0] == shutil.which(native.MUSL_COMPILER)


def test_a_cache_directory_others_can_write_is_not_used(private_cache: Path) -> None:
    private_cache.mkdir()
    private_cache.chmod(0o777)
    assert native.launcher_binary() is None  # the shell fallback keeps every promise instead
    assert not list(private_cache.iterdir())


@needs_compiler
@pytest.mark.parametrize("launcher", ["native", "shell"], indirect=True)
def test_a_plain_command_alone_gets_the_tasks_variables_and_directory(
    tmp_path: Path, launcher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task's LD_PRELOAD loads in its command and in no host process before it (the launcher
    applies the variables after its drop, at the exec), nothing of the worker's environment
    reaches the command, and it starts in the instance's working directory."""
    if launcher == "native" and native.launcher_binary() is None:
        pytest.skip("no C compiler: the native launcher cannot be built here")
    loaded = tmp_path / "loaded-in"
    library = tmp_path / "probe.so"
    compile_library(preload_library(loaded), library)
    monkeypatch.setenv("WORKER_ONLY_PROBE", "leaked")
    task_dir = write_task(tmp_path / "task", toml=f'[environment]\nenv = {{ LD_PRELOAD = "{library}" }}\n')
    spec = spec_for(tmp_path, task_dir, "true")

    async def run() -> tuple[str, str, int | None]:
        provider = LocalEnvironmentProvider("plain")
        async with provider.instance(load_harbor_task(task_dir), spec) as environment:
            result = await environment.exec(["sh", "-c", "export -p; pwd"])  # builtins: one process
            return environment.visible.app, result.stdout, result.exit_code

    app, seen, exit_code = asyncio.run(run())
    assert exit_code == 0
    assert str(library) in seen and "LD_PRELOAD" in seen
    assert "WORKER_ONLY_PROBE" not in seen
    assert seen.strip().splitlines()[-1] == app
    assert len(loaded.read_text().splitlines()) == 1, loaded.read_text()  # the command's shell alone


_STARTER = """
import os, subprocess, sys
parent = str(os.getpid()) if sys.argv[2] == "self" else sys.argv[2]
command = subprocess.Popen([sys.argv[1], "--parent", parent, "--", "/bin/sleep", "600"])
print(command.pid, flush=True)
print(command.wait(), flush=True)
"""


@needs_compiler
def test_a_command_dies_with_the_worker_that_started_it(private_cache: Path) -> None:
    """A worker killed mid-trial leaves no command of its running on."""
    binary = native.launcher_binary()
    assert binary is not None
    assert "--parent" in native.launcher_prefix([], [], None)
    starter = subprocess.Popen(
        [sys.executable, "-c", _STARTER, binary, "self"], stdout=subprocess.PIPE, text=True
    )
    assert starter.stdout is not None
    pid = int(starter.stdout.readline())
    wait_for(lambda: Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"/bin/sleep"), timeout=10)
    starter.kill()
    starter.wait()
    wait_for(lambda: not process_alive(pid), timeout=10)


@needs_compiler
def test_a_command_whose_worker_is_gone_before_it_starts_is_not_run(private_cache: Path) -> None:
    """Killed between starting the launcher and the launcher following it, the worker cannot be
    followed: the launcher sees its parent is not the worker and runs nothing."""
    binary = native.launcher_binary()
    assert binary is not None
    starter = subprocess.run(
        [sys.executable, "-c", _STARTER, binary, "1"], capture_output=True, text=True, timeout=30, check=True
    )
    assert starter.stdout.splitlines()[1] == "126"
    assert "gone before the command started: parent 1" in starter.stderr
