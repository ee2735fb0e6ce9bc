"""A local worker shares its capacity among processes: each runs its share, and none outlives the
first, however that one ends."""

import asyncio
import gc
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from envloop.core import capacity
from envloop.core.capacity import default_processes, split_capacity
from envloop.scheduling.process import capacity_shares, run_worker
from envloop.services.context import Context
from envloop.store.tables import Trial
from envloop.store.tables import Worker as WorkerRow
from tests.conftest import El, process_alive, processes_where, submit_command_job, wait_for


@pytest.mark.parametrize(
    ("total", "processes", "shares"),
    [(4, 2, [2, 2]), (5, 2, [3, 2]), (3, 2, [2, 1]), (2, 4, [1, 1]), (1, 3, [1]), (7, 1, [7])],
)
def test_capacity_is_split_as_evenly_as_it_goes_and_no_process_is_left_empty(
    total: int, processes: int, shares: list[int]
) -> None:
    assert split_capacity(total, processes) == shares


@pytest.mark.parametrize(
    ("cores", "total", "expected"),
    [(2, 2, 1), (2, 3, 1), (2, 4, 2), (2, 16, 2), (8, 4, 2), (8, 16, 8), (1, 4, 1), (16, 1, 1)],
)
def test_by_default_one_process_per_core_each_running_at_least_two_trials(
    monkeypatch: pytest.MonkeyPatch, cores: int, total: int, expected: int
) -> None:
    monkeypatch.setattr(capacity.os, "cpu_count", lambda: cores)
    assert default_processes(total) == expected


def test_a_worker_of_another_executor_is_one_process_of_the_whole_capacity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ray spreads trials over its cluster itself; a local worker is split, by default one process
    per core each running at least two trials."""
    monkeypatch.setattr(capacity.os, "cpu_count", lambda: 2)
    assert capacity_shares(7, None, "ray") == [7]
    assert capacity_shares(7, 3, "local") == [3, 2, 2]
    assert capacity_shares(7, None, "local") == [4, 3]


def test_processes_are_refused_with_the_ray_executor_before_any_cluster_is_reached(el: El) -> None:
    result = el("worker", "--executor", "ray", "--ray-address", "127.0.0.2:1", "--processes", "2")
    assert result.code == 2
    assert "--processes (or ENVLOOP_WORKER_PROCESSES) applies to --executor local" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_a_process_count_that_is_not_a_positive_integer_is_refused(el: El, value: str) -> None:
    result = el("worker", "--idle-exit", "0.1", env={"ENVLOOP_WORKER_PROCESSES": value})
    assert result.code == 2
    assert "Traceback" not in result.stderr


def _workers(ctx: Context) -> list[WorkerRow]:
    with ctx.store.read() as session:
        return list(session.scalars(select(WorkerRow)))


def _statuses(ctx: Context, job_id: str) -> dict[str, list[str]]:
    """Trial statuses by the worker (pid) that holds them; pending ones under ''."""
    with ctx.store.read() as session:
        rows = session.execute(select(Trial.status, Trial.lease_owner).where(Trial.job_id == job_id)).all()
        pids = {row.id: row.pid for row in session.execute(select(WorkerRow.id, WorkerRow.pid))}
    found: dict[str, list[str]] = {}
    for status, owner in rows:
        key = str(pids.get(owner, "")) if status == "running" else ""
        found.setdefault(key, []).append(status)
    return found


def _others(ctx: Context, first: subprocess.Popen[bytes]) -> list[int]:
    """The pids of the group's processes other than the first."""
    return [row.pid for row in _workers(ctx) if row.pid != first.pid]


@pytest.fixture
def group(ctx: Context, home: Path, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A worker of capacity 4 in two processes, running a job of four 30-second trials."""
    job_id = submit_command_job(ctx, tmp_path, "sleep 30", tasks=4)
    first = subprocess.Popen(
        [sys.executable, "-m", "envloop", "worker", "--capacity", "4", "--processes", "2"],
        env=dict(os.environ, ENVLOOP_HOME=str(home)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: len(_workers(ctx)) == 2 and _statuses(ctx, job_id).get("") is None)
        yield job_id, first
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        for row in _workers(ctx):
            if row.pid != first.pid and process_alive(row.pid):
                os.kill(row.pid, signal.SIGKILL)


@pytest.mark.slow
def test_each_process_runs_its_share_and_together_they_run_the_whole_capacity(
    ctx: Context, group: tuple[str, subprocess.Popen[bytes]]
) -> None:
    job_id, first = group
    rows = _workers(ctx)
    assert sorted(row.capacity for row in rows) == [2, 2]
    assert len({row.pid for row in rows}) == 2 and first.pid in {row.pid for row in rows}
    running = _statuses(ctx, job_id)
    assert sorted(len(v) for k, v in running.items() if k) == [2, 2]


@pytest.mark.slow
def test_stopping_the_first_process_stops_the_group_and_hands_every_trial_back(
    ctx: Context, group: tuple[str, subprocess.Popen[bytes]]
) -> None:
    job_id, first = group
    others = _others(ctx, first)
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=60) == 0
    assert not any(process_alive(pid) for pid in others)
    assert _workers(ctx) == []
    assert _statuses(ctx, job_id) == {"": ["pending"] * 4}


@pytest.mark.slow
def test_a_killed_first_process_takes_the_others_with_it_and_they_hand_their_trials_back(
    ctx: Context, group: tuple[str, subprocess.Popen[bytes]]
) -> None:
    job_id, first = group
    others = _others(ctx, first)
    first.kill()
    first.wait()
    wait_for(lambda: not any(process_alive(pid) for pid in others), timeout=30)
    statuses = _statuses(ctx, job_id)
    # The others' trials are back already. The killed process's own wait for their leases to lapse,
    # unless a sibling's upkeep saw it gone before the sibling itself stopped: then they are back too.
    assert set(statuses) <= {"", str(first.pid)}
    assert statuses[""] in (["pending"] * 2, ["pending"] * 4)
    assert len(statuses[""]) + len(statuses.get(str(first.pid), [])) == 4


@pytest.mark.slow
def test_a_crashed_process_of_the_group_is_started_again(
    ctx: Context, group: tuple[str, subprocess.Popen[bytes]]
) -> None:
    _, first = group
    (other,) = _others(ctx, first)
    os.kill(other, signal.SIGKILL)
    wait_for(lambda: any(row.pid not in (first.pid, other) for row in _workers(ctx)), timeout=30)
    assert first.poll() is None


def test_what_a_worker_process_loaded_before_serving_is_out_of_the_collectors_reach(ctx: Context) -> None:
    """A full collection would otherwise walk every module, schema and table the worker loaded,
    over and over for as long as it serves."""
    from envloop.scheduling.worker import Worker, WorkerConfig  # noqa: PLC0415

    worker = Worker(ctx, WorkerConfig(capacity=1, idle_poll=0.01))
    loaded = len(gc.get_objects())
    frozen: list[int] = []

    async def serve_once(until: Callable[[], bool] | None = None) -> None:
        frozen.append(gc.get_freeze_count())

    worker.run = serve_once  # type: ignore[method-assign]
    try:
        run_worker(worker, None, None)
    finally:
        gc.unfreeze()
    assert frozen[0] >= loaded * 0.9


def test_after_a_worker_ran_a_later_event_loop_can_still_start_subprocesses(ctx: Context) -> None:
    """The worker's subprocess watcher is process-wide and tied to its loop (Python 3.11): it is
    put back when the worker ends, so a program that ran one (an embedding script, a notebook)
    can still start processes from another loop."""
    from envloop.scheduling.worker import Worker, WorkerConfig  # noqa: PLC0415

    async def child() -> int:
        process = await asyncio.create_subprocess_exec("true")
        return await process.wait()

    asyncio.run(Worker(ctx, WorkerConfig(capacity=1, idle_poll=0.01)).run(until=lambda: True))
    assert asyncio.run(child()) == 0


def test_workers_on_overlapping_threads_each_see_their_subprocesses_end(ctx: Context) -> None:
    """Two workers on threads of one program, the first ending while the second's subprocess runs:
    the second still sees it end (a watcher the first installed and closed would never tell it)."""
    from envloop.scheduling.worker import Worker, WorkerConfig  # noqa: PLC0415

    second_running = threading.Event()
    first_ended = threading.Event()
    codes: list[int] = []

    def first() -> None:
        asyncio.run(Worker(ctx, WorkerConfig(capacity=1, idle_poll=0.01)).run(until=second_running.is_set))
        first_ended.set()

    async def second_child() -> int:
        process = await asyncio.create_subprocess_exec("sleep", "0.5")
        second_running.set()
        await asyncio.to_thread(first_ended.wait, 10)
        return await asyncio.wait_for(process.wait(), timeout=10)

    def second() -> None:
        async def run() -> None:
            worker = Worker(ctx, WorkerConfig(capacity=1, idle_poll=0.01))
            done = asyncio.Event()
            serving = asyncio.create_task(worker.run(until=done.is_set))
            codes.append(await second_child())
            done.set()
            await serving

        asyncio.run(run())

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    threads[0].start()
    time.sleep(0.3)
    threads[1].start()
    for thread in threads:
        thread.join(timeout=30)
    assert codes == [0]


def _group_processes(home: Path) -> list[int]:
    """Live `el worker --in-group` processes started for `home`."""
    mark = f"ENVLOOP_HOME={home}".encode()
    return processes_where(lambda argv, environ: b"--in-group" in argv and mark in environ)


def test_a_refused_environment_leaves_no_process_of_the_group_behind(el: El) -> None:
    """The group starts before the worker has loaded what checks its environment; a choice refused
    then takes the group's processes with it."""
    result = el("worker", "--capacity", "4", "--processes", "2", "--environment", "nowhere")
    assert result.code == 2, result.stderr
    assert "nowhere" in result.stderr
    assert "Traceback" not in result.stderr
    wait_for(lambda: not _group_processes(el.home), timeout=10)
