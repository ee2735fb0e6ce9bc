"""Captured output is bounded while it is written: a command that writes without end keeps its
first and last bytes, the capture never grows past what a trial keeps of one file, and the trial
says how much was dropped. The local environment's channels (its commands' stdout and stderr),
attacked with real processes; the Docker ones are in test_docker_bounded_output.py."""

import asyncio
import contextlib
import tempfile
import time
from pathlib import Path

import pytest

from envloop.environments import Environment
from envloop.environments.capture import BoundedWriter
from envloop.environments.keeping import MAX_KEPT_FILE_BYTES
from tests.test_environment_local import MODES, make_spec, make_task, run_in

NOTE = b"bytes of this output were dropped here]"


@pytest.mark.parametrize("chunk", [1, 3, 7, 10, 11, 25, 1000])
def test_a_writer_keeps_the_head_and_the_tail_in_order_whatever_the_chunks(chunk: int) -> None:
    data = bytes(range(256)) * 4
    with tempfile.TemporaryFile() as file:
        writer = BoundedWriter(file, head=10, tail=25)
        for start in range(0, len(data), chunk):
            writer.write(data[start : start + chunk])
        assert writer.finish() == len(data) - 35
        file.seek(0)
        kept = file.read()
    assert kept.startswith(data[:10]) and kept.endswith(data[-25:])
    assert f"{len(data) - 35:,} bytes of this output were dropped here".encode() in kept


def test_a_writer_under_its_bounds_keeps_everything_and_says_nothing() -> None:
    with tempfile.TemporaryFile() as file:
        writer = BoundedWriter(file, head=10, tail=25)
        for piece in (b"0123456789", b"abc", b"def"):
            writer.write(piece)
        assert writer.finish() == 0
        file.seek(0)
        assert file.read() == b"0123456789abcdef"


def _watch(path: Path, sizes: list[int]) -> "asyncio.Task[None]":
    async def watch() -> None:
        while True:
            with contextlib.suppress(FileNotFoundError):
                sizes.append(path.stat().st_size)
            await asyncio.sleep(0.01)

    return asyncio.create_task(watch())


@pytest.mark.parametrize("mode", MODES)
def test_endless_output_never_grows_the_capture_past_its_bound(tmp_path: Path, mode: str) -> None:
    """`cat /dev/zero` until the phase's timeout: the capture file is watched while the command runs
    and never holds more than a trial keeps of one file; its head and its tail are kept."""
    task = make_task(tmp_path / "zero-task")
    spec = make_spec(tmp_path, task)
    out = tmp_path / "captured" / "stdout.txt"
    sizes: list[int] = []

    async def body(env: Environment) -> None:
        watcher = _watch(out, sizes)
        try:
            result = await env.exec(
                ["sh", "-c", "echo FIRST; echo SECOND >&2; cat /dev/zero"], stdout_path=out, timeout=4
            )
        finally:
            watcher.cancel()
        assert result.timed_out and not result.stdout_whole
        assert any("of its stdout were dropped from the middle" in line for line in env.warnings)

    run_in(mode, task, spec, body)
    data = out.read_bytes()
    assert max(sizes) <= MAX_KEPT_FILE_BYTES and len(data) <= MAX_KEPT_FILE_BYTES
    assert data.startswith(b"FIRST\n\0") and NOTE in data and data.endswith(b"\0" * 1000)


@pytest.mark.parametrize("mode", MODES)
def test_the_last_words_of_a_flood_are_kept_after_the_note(tmp_path: Path, mode: str) -> None:
    task = make_task(tmp_path / "flood-task")
    spec = make_spec(tmp_path, task)
    err = tmp_path / "captured" / "stderr.txt"

    async def body(env: Environment) -> None:
        result = await env.exec(
            ["sh", "-c", "head -c 100000000 /dev/zero >&2; echo LAST >&2"], stderr_path=err, timeout=60
        )
        assert result.exit_code == 0 and result.stderr.endswith("LAST\n")

    run_in(mode, task, spec, body)
    data = err.read_bytes()
    assert len(data) <= MAX_KEPT_FILE_BYTES and data.endswith(b"\0LAST\n") and NOTE in data


def test_a_daemon_that_keeps_the_commands_stdout_does_not_hold_the_command(tmp_path: Path) -> None:
    """In plain mode a process left behind can hold the output pipe open: the command still ends
    when it does, and the daemon lives on (its output is dropped) until the instance stops."""
    task = make_task(tmp_path / "daemon-task")
    spec = make_spec(tmp_path, task)

    async def body(env: Environment) -> None:
        started = time.monotonic()
        result = await env.exec(["sh", "-c", "(while true; do echo tick; sleep 0.05; done) & echo started"])
        assert time.monotonic() - started < 5
        assert result.exit_code == 0 and "started" in result.stdout.splitlines()  # ticks may come first
        alive = await env.exec(["sh", "-c", "ps -eo args | grep -c '[w]hile true'"])
        assert alive.stdout.strip() != "0"

    run_in("plain", task, spec, body)


@pytest.mark.parametrize("mode", MODES)
def test_a_stream_that_printed_nothing_keeps_no_file_and_an_earlier_runs_file_is_emptied(
    tmp_path: Path, mode: str
) -> None:
    """Each capture file is made at its stream's first byte: a silent stream leaves none (nor its
    directory), one that printed keeps exactly what it printed, and a file an earlier run left at a
    capture's path holds nothing of that run once the new one printed nothing."""
    task = make_task(tmp_path / "quiet-task")
    spec = make_spec(tmp_path, task)
    quiet, loud, stale = tmp_path / "quiet", tmp_path / "loud", tmp_path / "stale"
    stale.mkdir()
    (stale / "stdout.txt").write_text("the earlier run's output\n")

    async def body(env: Environment) -> None:
        silent = await env.exec(["true"], stdout_path=quiet / "stdout.txt", stderr_path=quiet / "stderr.txt")
        assert (silent.exit_code, silent.stdout, silent.stderr) == (0, "", "")
        streams = {"stdout_path": loud / "stdout.txt", "stderr_path": loud / "stderr.txt"}
        said = await env.exec(["sh", "-c", "echo out; echo err >&2"], **streams)
        assert (said.stdout, said.stderr) == ("out\n", "err\n")
        again = await env.exec(["true"], stdout_path=stale / "stdout.txt")
        assert again.stdout == ""

    run_in(mode, task, spec, body)
    assert not quiet.exists()
    assert ((loud / "stdout.txt").read_text(), (loud / "stderr.txt").read_text()) == ("out\n", "err\n")
    assert (stale / "stdout.txt").read_text() == ""
