"""No sandboxed command creates a user namespace, by any of the calls that make one, whether the
seccomp filter refuses it (where libseccomp is installed) or bwrap's `--disable-userns` does; and
the filter leaves everything else a command does (threads, forks) working."""

import asyncio
import platform
import shutil
import struct
from pathlib import Path

import pytest

from envloop.environments import LocalEnvironmentProvider
from envloop.environments.local import bwrap
from envloop.environments.local.userns_filter import userns_filter
from envloop.tasks.harbor import load_harbor_task
from tests.test_containment import spec_for, write_task

pytestmark = pytest.mark.skipif(
    bwrap.bwrap_executable()[0] is None, reason="bwrap cannot create a sandbox on this host"
)

# Each call asks the kernel for a new user namespace, straight through syscall(2), so no C
# library's fallback hides what the kernel answered; a child that does get made leaves at once.
ATTEMPTS = r"""
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
NEWUSER, SIGCHLD = 0x10000000, 17
CALLS = {
    "unshare": lambda: libc.syscall(272, NEWUSER),
    "clone": lambda: libc.syscall(56, NEWUSER | SIGCHLD, 0, 0, 0, 0),
    "clone3": lambda: libc.syscall(435, ctypes.create_string_buffer(
        struct.pack("<11Q", NEWUSER, 0, 0, 0, SIGCHLD, 0, 0, 0, 0, 0, 0)), 88),
}
for name, call in CALLS.items():
    tester = os.fork()  # each attempt from a process of its own: one that succeeds changes no other
    if tester == 0:
        result = call()
        if result != 0 or name == "unshare":  # 0 from a clone: the child it made
            print(name, "refused" if result == -1 else "made", ctypes.get_errno(), flush=True)
        os._exit(0)
    os.waitpid(tester, 0)
import threading
threading.Thread(target=print, args=("thread works",)).start()
child = os.fork()
if child == 0:
    os._exit(0)
os.waitpid(child, 0)
print("fork works", flush=True)
"""

on_x86_64 = pytest.mark.skipif(platform.machine() != "x86_64", reason="the system call numbers are x86-64's")


def _run_inside(tmp_path: Path, script: str) -> str:
    async def body() -> str:
        task_dir = write_task(tmp_path / "task", toml='[agent]\nuser = "root"\n')
        spec = spec_for(tmp_path, task_dir, "true")
        provider = LocalEnvironmentProvider("bwrap")
        async with provider.instance(load_harbor_task(task_dir), spec) as environment:
            result = await environment.exec(["python3", "-c", script], user="root")
        assert result.exit_code == 0, result.stderr
        return result.stdout

    return asyncio.run(body())


@on_x86_64
@pytest.mark.skipif(shutil.which("python3") is None, reason="the attempts are a python3 script")
@pytest.mark.parametrize("refusal", ["seccomp filter", "bwrap --disable-userns"])
def test_no_call_makes_a_user_namespace_and_threads_and_forks_still_work(
    tmp_path: Path, refusal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if refusal == "seccomp filter" and userns_filter() is None:
        pytest.skip("libseccomp is not installed here (scripts/setup installs it)")
    if refusal != "seccomp filter":
        monkeypatch.setattr(bwrap, "userns_filter", lambda: None)
    seen = _run_inside(tmp_path, "print(open('/proc/self/status').read())\n" + ATTEMPTS)
    for call in ("unshare", "clone", "clone3"):
        assert f"{call} refused" in seen, seen
    assert "made" not in seen
    assert "thread works" in seen and "fork works" in seen
    # The filter is what refused them, or no filter was loaded at all.
    assert ("Seccomp:\t2" in seen) == (refusal == "seccomp filter"), seen


def _instructions(program: bytes) -> list[tuple[int, int, int, int]]:
    """A classic BPF program's instructions: (code, jump if true, jump if false, constant)."""
    return [struct.unpack("<HBBI", program[at : at + 8]) for at in range(0, len(program), 8)]


@on_x86_64
def test_the_filter_checks_every_abi_a_process_here_can_call_the_kernel_with() -> None:
    program = userns_filter()
    if program is None:
        pytest.skip("libseccomp is not installed here (scripts/setup installs it)")
    constants = {k for _, _, _, k in _instructions(program)}
    audit_arch_x86_64, audit_arch_i386, x32_bit = 0xC000003E, 0x40000003, 0x40000000
    assert {audit_arch_x86_64, audit_arch_i386} <= constants
    # clone, unshare and clone3 by number in each ABI: x86-64's, x32's (x86-64's with the x32
    # bit set) and i386's own.
    assert {56, 272, 435} <= constants
    assert {x32_bit | 56, x32_bit | 272, x32_bit | 435} <= constants
    assert {120, 310} <= constants
    # A call from an ABI the filter does not know kills the process rather than passes.
    seccomp_ret_kill_process, seccomp_ret_kill_thread = 0x80000000, 0x00000000
    returns = [k for code, _, _, k in _instructions(program) if code == 0x06]
    assert seccomp_ret_kill_process in returns or seccomp_ret_kill_thread in returns
