"""A server with several worker processes on one store, SQLite or PostgreSQL: a worker killed in the
middle of its trials loses nothing, and every result is recorded exactly once."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from envloop.services.context import Context
from envloop.services.jobs import JobRequest
from envloop.services.profiles import read_profile_file
from envloop.store.tables import Trial, Worker
from tests.api_server import Server
from tests.conftest import make_task, write_profile
from tests.pg import BACKENDS

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("store_url", BACKENDS, indirect=True)]


def _wait_for(condition: Callable[[], object], timeout: float = 120) -> object:
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


@pytest.fixture
def workers(server: Server) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Three `el worker` processes on the server's store, as other machines would run them."""
    env = dict(os.environ, ENVLOOP_HOME=str(server.el.home))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "envloop", "worker", "--capacity", "2", "--lease-ttl", "2"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(3)
    ]
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        proc.wait(timeout=60)


def _trials(ctx: Context, job_id: str) -> list[Trial]:
    with ctx.store.read() as session:
        return list(session.scalars(select(Trial).where(Trial.job_id == job_id)))


def _victim(ctx: Context, job_id: str) -> tuple[int, set[str]] | None:
    """A worker process that is running trials of the job right now, and those trials."""
    with ctx.store.read() as session:
        rows = session.execute(
            select(Trial.id, Worker.pid)
            .join(Worker, Worker.id == Trial.lease_owner)
            .where(Trial.job_id == job_id, Trial.status == "running", Trial.runs == 1)
        ).all()
    if not rows:
        return None
    pid = rows[0].pid
    return pid, {row.id for row in rows if row.pid == pid}


def test_a_worker_killed_mid_trial_loses_nothing_and_records_each_result_once(
    server: Server, workers: list[subprocess.Popen[bytes]], ctx: Context, tmp_path: Path
) -> None:
    client = server.client()
    src = tmp_path / "tasks"
    for i in range(6):
        make_task(src, f"t{i}")
    dataset = client.push_dataset(src, "slow").ref
    command = "sleep 3; touch ${ENVLOOP_APP_DIR:-/app}/done"
    document = read_profile_file(
        write_profile(tmp_path / "p.json", {"AGENT_NAME": "command", "AGENT_COMMAND": command})
    )
    client.create_profile("cmd", "1", document)
    job_id = client.submit_job(JobRequest(dataset=dataset, profiles=["cmd@1"], attempts=2)).job.id

    found = _wait_for(lambda: _victim(ctx, job_id))
    assert isinstance(found, tuple)
    pid, killed = found
    assert pid in {p.pid for p in workers}
    os.kill(pid, signal.SIGKILL)

    _wait_for(lambda: client.get_job(job_id).status in ("completed", "failed", "cancelled"), timeout=240)
    trials = _trials(ctx, job_id)
    assert len(trials) == 12
    assert all(t.status == "completed" and t.reward == 1.0 for t in trials), [
        (t.task_name, t.attempt, t.status, t.reward, t.error_type, t.error_message, t.runs) for t in trials
    ]
    assert {t.id: t.runs for t in trials} == {t.id: 2 if t.id in killed else 1 for t in trials}
    counts = client.job_result(job_id).profiles["cmd@1"].score_counts
    assert (counts.total, counts.scored, counts.missing) == (12, 12, 0)
