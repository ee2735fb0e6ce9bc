"""A trial command's host process (environments/local/spawn.py): its exit as the shell reports it,
no descriptor kept once it is waited for, a wait that can be cancelled and taken up again, and
nothing of the worker's on its stdin."""

import asyncio
import os
import signal
from pathlib import Path

import pytest

from envloop.environments.local import spawn

ENV = {"PATH": "/usr/bin:/bin"}


def _run(argv: list[str]) -> tuple[int, bytes]:
    async def go() -> tuple[int, bytes]:
        read, write = os.pipe()
        try:
            process = spawn.start(argv, stdout=write, stderr=write, env=ENV, cwd="/")
        finally:
            os.close(write)
        code = await process.wait()
        with os.fdopen(read, "rb") as output:
            return code, output.read()

    return asyncio.run(go())


def _open_descriptors() -> int:
    return len(list(Path("/proc/self/fd").iterdir()))


def test_the_exit_status_and_a_death_by_signal_are_reported() -> None:
    assert _run(["sh", "-c", "exit 3"])[0] == 3
    assert _run(["sh", "-c", "kill -KILL $$"])[0] == -signal.SIGKILL


def test_stdin_is_empty_and_the_command_sees_only_its_own_variables_and_directory() -> None:
    code, output = _run(["sh", "-c", 'cat; echo "[$(pwd)] [$HOME] [$PATH]"'])
    assert code == 0
    assert output == b"[/] [] [/usr/bin:/bin]\n"


def test_no_descriptor_is_left_open_once_commands_are_waited_for() -> None:
    before = _open_descriptors()
    for _ in range(30):
        assert _run(["true"])[0] == 0
    assert _open_descriptors() <= before + 1  # the one /dev/null, kept for stdin


def test_a_cancelled_wait_can_be_taken_up_again() -> None:
    async def go() -> int:
        process = spawn.start(["sleep", "30"], stdout=2, stderr=2, env=ENV, cwd="/")
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await process.wait()
        assert process.returncode is None
        os.killpg(process.pid, signal.SIGKILL)  # its own session: its group is its pid
        return await process.wait()

    assert asyncio.run(go()) == -signal.SIGKILL


def test_commands_waited_for_at_once_each_get_their_own_status() -> None:
    async def go() -> list[int]:
        processes = [
            spawn.start(["sh", "-c", f"sleep 0.0{i}; exit {i}"], stdout=2, stderr=2, env=ENV, cwd="/")
            for i in range(8)
        ]
        return list(await asyncio.gather(*(p.wait() for p in reversed(processes))))

    assert asyncio.run(go()) == list(reversed(range(8)))
