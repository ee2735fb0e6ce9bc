"""No submission is left without a worker, whatever the store's background worker is doing: a
worker held up in its exit (the interpreter waiting for a thread) has already let go of the
background lock, so a submission starts a new one; and an install a cancelled trial no longer
waits for is ended with its package manager, so nothing holds a worker's exit up that way."""

import asyncio
import functools
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from envloop.agents.cache import AgentCache, InstallCommand
from envloop.core.cancellable_thread import to_thread_cancellable
from envloop.environments.local import SANDBOX_VARIABLE
from envloop.scheduling.background import BackgroundLock, is_running, try_hold_lock
from envloop.scheduling.worker import Worker as SchedulingWorker
from envloop.scheduling.worker import WorkerConfig
from envloop.services import job_submission
from envloop.services.context import Context, open_context
from envloop.store.tables import Trial, Worker
from tests.conftest import El, make_task, stop_process, submit_command_job, wait_for, write_profile

HELD_AT_EXIT = r"""
import asyncio, os, runpy, sys, time
release = sys.argv.pop(1)

def hold():
    while not os.path.exists(release):
        time.sleep(0.05)

class HeldAtExit(asyncio.DefaultEventLoopPolicy):
    def new_event_loop(self):
        loop = super().new_event_loop()
        loop.run_in_executor(None, hold)  # asyncio.run's end waits for its executor's threads
        return loop

asyncio.set_event_loop_policy(HeldAtExit())
sys.argv[0] = "el"
runpy.run_module("envloop", run_name="__main__")
"""
"""`el worker` whose event loop's end waits for a thread of its executor until the test lets it
go, as a worker's waited for an abandoned install."""

SLOW_INSTALL = r"""#!/bin/bash
echo $$ > "$FAKE_STATE/pid"
echo "fetching the package"
sleep 600
"""


def _workers(home: Path) -> int:
    ctx = open_context(home)
    try:
        with ctx.store.read() as session:
            return session.scalar(select(func.count()).select_from(Worker)) or 0
    finally:
        ctx.close()


@pytest.mark.slow
def test_a_submission_while_the_worker_is_held_in_its_exit_starts_a_worker_and_runs(
    el: El, home: Path, tmp_path: Path
) -> None:
    make_task(tmp_path / "tasks", "t0", solve="touch done")
    el.ok("dataset", "push", str(tmp_path / "tasks"), "--name", "ds")
    el.ok(
        "profile",
        "create",
        "oracle",
        "1",
        "--file",
        str(write_profile(tmp_path / "o.json", {"AGENT_NAME": "oracle"})),
    )
    release = tmp_path / "release"
    env = {**os.environ, "ENVLOOP_HOME": str(home)}
    held = subprocess.Popen(
        [sys.executable, "-c", HELD_AT_EXIT, str(release), "worker", "--background", "--idle-exit", "0.5"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(lambda: _workers(home) == 1, timeout=120)  # it serves the store
        wait_for(lambda: _workers(home) == 0, timeout=120)  # idle, it has left the store
        time.sleep(0.5)
        assert held.poll() is None, "the worker was to be held in its exit"
        assert not is_running(home), "a worker held in its exit still holds the background lock"
        done = el(
            *("job", "submit", "--dataset", "ds@1", "--profile", "oracle@1", "--wait", "--json"),
            timeout=120,
        )
        assert done.code == 0, done.stderr
        assert done.json()["counts"]["completed"] == 1
        assert held.poll() is None  # the trial ran on the worker the submission started
    finally:
        release.touch()
        stop_process(held)


def test_a_cancelled_install_ends_its_package_manager_and_its_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("FAKE_STATE", str(state))
    slow = tmp_path / "slow-npm"
    slow.write_text(SLOW_INSTALL)
    slow.chmod(0o755)
    cache = AgentCache(tmp_path / "cache")
    commands = [InstallCommand((str(slow), "{target}"))]
    threads = threading.active_count()

    async def install_then_cancel() -> float:
        installing = asyncio.ensure_future(
            to_thread_cancellable(
                functools.partial(cache.ensure, "tool-1.0-linux-x64", commands, ["bin/tool"])
            )
        )
        # A second trial waiting for the same install (for the lock the first one holds).
        waiting = asyncio.ensure_future(
            to_thread_cancellable(
                functools.partial(cache.ensure, "tool-1.0-linux-x64", commands, ["bin/tool"])
            )
        )
        while not (state / "pid").exists():
            await asyncio.sleep(0.05)
        started = time.monotonic()
        installing.cancel()
        waiting.cancel()
        for task in (installing, waiting):
            with pytest.raises(asyncio.CancelledError):
                await task
        return time.monotonic() - started

    took = asyncio.run(install_then_cancel())
    assert took < 5
    pid = int((state / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the package manager is gone, not left to run for its ten minutes
    assert threading.active_count() == threads
    # No entry, no half-made tree, no failure remembered: the next trial installs anew. Only the
    # log so far stays, for the trial that was cut short to keep.
    left = [path.name for path in (tmp_path / "cache").iterdir() if path.suffix != ".lock"]
    assert [name for name in left if not name.endswith(".cut.log")] == []


def _serve(home: Path, lock: BackgroundLock) -> None:
    """A background worker as `el worker --background` runs one: idle for a moment, it exits."""
    ctx = open_context(home)
    try:
        config = WorkerConfig(capacity=2, idle_poll=0.01, idle_exit=0.05, background=True)
        asyncio.run(SchedulingWorker(ctx, config, lock=lock).run())
    finally:
        lock.release()
        ctx.close()


@pytest.mark.slow
def test_submissions_timed_around_a_workers_idle_exit_are_each_run(
    ctx: Context, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Jobs submitted one after the other, each at a random moment around the exit of a worker that
    leaves after 50 ms idle, each submission doing what `el job submit` does (its trials first,
    then a worker unless one holds the lock): each is run without the help of a later one."""
    monkeypatch.setenv(SANDBOX_VARIABLE, "plain")
    submit_command_job(ctx, tmp_path, "touch done")
    chance = random.Random(41)
    workers: list[threading.Thread] = []
    for number in range(40):
        request = job_submission.JobRequest(dataset="ds@1", profiles=["cmd@1"], request_id=f"r{number}")
        job_id = job_submission.submit_job(ctx, request).job.id
        lock = try_hold_lock(home)
        if lock is not None:
            workers.append(threading.Thread(target=_serve, args=(home, lock)))
            workers[-1].start()

        def done(job_id: str = job_id) -> bool:
            with ctx.store.read() as session:
                return session.scalar(select(Trial.status).where(Trial.job_id == job_id)) == "completed"

        wait_for(done, timeout=30)
        time.sleep(chance.uniform(0.02, 0.1))  # around the worker's exit, 50 ms after its last trial
    for worker in workers:
        worker.join(timeout=60)
    assert len(workers) > 1  # workers did exit between submissions
