"""A trial command's host process (environments/local/spawn.py): its exit as the shell reports it,
no descriptor kept once it is waited for, a wait that can be cancelled and taken up again, and
nothing of the worker's on its stdin; and teardown's wait for the processes it killed
(environments/procs.exits)."""

import asyncio
import errno
import os
import signal
import subprocess
from pathlib import Path

import pytest

from envloop.environments.local import spawn
from envloop.environments.procs import exits, wait_gone

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


def test_exits_returns_as_each_process_ends_and_not_later() -> None:
    """Teardown waits for the processes it killed through their pidfds: as long as their exit takes,
    not a polling interval, and never past its timeout."""

    async def go() -> tuple[float, float, int | None]:
        short = spawn.start(["sleep", "0.2"], stdout=2, stderr=2, env=ENV, cwd="/")
        long = spawn.start(["sleep", "30"], stdout=2, stderr=2, env=ENV, cwd="/")
        loop = asyncio.get_running_loop()
        started = loop.time()
        await exits([short.pid], timeout=20.0)
        ended_short = loop.time() - started
        started = loop.time()
        await exits([long.pid, 2**22 + 7], timeout=0.3)  # the second pid names no process
        waited_long = loop.time() - started
        still = long.returncode
        os.killpg(long.pid, signal.SIGKILL)
        await asyncio.gather(short.wait(), long.wait())
        return ended_short, waited_long, still

    ended_short, waited_long, still = asyncio.run(go())
    assert 0.15 < ended_short < 2.0
    assert 0.25 < waited_long < 2.0 and still is None


def test_exits_takes_a_process_that_ended_unreaped_as_ended() -> None:
    async def go() -> float:
        zombie = subprocess.Popen(["true"])
        while Path(f"/proc/{zombie.pid}/stat").read_text().split(")")[1].split()[0] != "Z":
            await asyncio.sleep(0.01)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await exits([zombie.pid], timeout=5.0)
        waited = loop.time() - started
        zombie.wait()
        return waited

    assert asyncio.run(go()) < 1.0


@pytest.mark.parametrize("pidfds", [True, False], ids=["pidfds", "no pidfds"])
def test_wait_gone_returns_as_killed_processes_end_and_names_a_survivor_at_its_deadline(
    pidfds: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The teardown without cgroups: with pidfds the wait lasts as long as the exit; without them
    (a kernel before 5.3) `/proc` is polled, never the whole timeout slept."""
    if not pidfds:

        def no_pidfds(pid: int) -> int:
            raise OSError(errno.ENOSYS, "pidfd_open")

        monkeypatch.setattr(os, "pidfd_open", no_pidfds)

    async def go() -> tuple[list[int], float, list[int], int]:
        killed = spawn.start(["sleep", "30"], stdout=2, stderr=2, env=ENV, cwd="/")
        survivor = spawn.start(["sleep", "30"], stdout=2, stderr=2, env=ENV, cwd="/")
        loop = asyncio.get_running_loop()
        os.kill(killed.pid, signal.SIGKILL)
        started = loop.time()
        gone = await wait_gone([killed.pid], timeout=20.0)
        waited = loop.time() - started
        left = await wait_gone([survivor.pid], timeout=0.3)
        os.kill(survivor.pid, signal.SIGKILL)
        await asyncio.gather(killed.wait(), survivor.wait())
        return gone, waited, left, survivor.pid

    gone, waited, left, survivor_pid = asyncio.run(go())
    assert gone == [] and waited < 2.0
    assert left == [survivor_pid]
