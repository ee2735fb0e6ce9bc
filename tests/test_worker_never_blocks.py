"""A worker never blocks on the store: a write lock held elsewhere for longer than a lock wait (and
than a lease) delays recording, but the running trials go on, their leases are kept, and every
trial is recorded exactly once."""

import asyncio
import logging
import sqlite3
import threading
import time
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import select
from sqlalchemy.engine import make_url

from envloop.scheduling.worker import Worker, WorkerConfig
from envloop.services.context import Context
from envloop.store.db import LOCK_WAIT_SEC
from envloop.store.tables import Job, Trial
from tests.conftest import submit_command_job
from tests.pg import BACKENDS

LEASE_SEC = LOCK_WAIT_SEC + 1
HOLD_SEC = LEASE_SEC + 2
"""The lock outlasts one lock wait and the lease: renewing and recording must wait it out."""


def _hold_write_lock(url: str, seconds: float, taken: threading.Event) -> None:
    """Block every writer of the trials from another connection, as a long write elsewhere would
    (readers go on: SQLite in WAL mode, and PostgreSQL's EXCLUSIVE table lock, let them)."""
    if url.startswith("sqlite"):
        connection = sqlite3.connect(make_url(url).database or "", isolation_level=None)
        connection.execute("BEGIN EXCLUSIVE")
        taken.set()
        time.sleep(seconds)
        connection.execute("COMMIT")
        connection.close()
        return
    plain = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(plain) as connection:
        connection.execute("LOCK TABLE trials IN EXCLUSIVE MODE")
        taken.set()
        time.sleep(seconds)


async def _run(ctx: Context, job_id: str, store_url: str, total: int) -> tuple[Worker, float, float]:
    """Run a worker; once its first trials run, lock the store for HOLD_SEC. Returns the worker,
    the longest the event loop went without running a ready callback, and the lock's duration."""
    worker = Worker(ctx, WorkerConfig(capacity=3, lease_ttl=LEASE_SEC, idle_poll=0.05))
    run = asyncio.create_task(worker.run(until=lambda: worker.completed >= total))
    while len(worker._running) < 3:
        if run.done():
            run.result()  # the worker ended before its trials ran: show why
            raise AssertionError("the worker stopped before running its trials")
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)  # the trials are under way
    taken = threading.Event()
    holder = asyncio.create_task(asyncio.to_thread(_hold_write_lock, store_url, HOLD_SEC, taken))
    while not taken.is_set():
        if holder.done():
            holder.result()  # the lock could not be taken: show why
        await asyncio.sleep(0.01)
    locked_at = time.monotonic()
    longest_gap, last = 0.0, time.monotonic()
    while not holder.done():
        await asyncio.sleep(0.05)
        now = time.monotonic()
        longest_gap, last = max(longest_gap, now - last), now
    holder.result()
    held = time.monotonic() - locked_at
    await asyncio.wait_for(run, timeout=120)
    return worker, longest_gap, held


@pytest.mark.slow
@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_a_write_lock_held_longer_than_a_lease_stalls_nothing_and_loses_no_trial(
    ctx: Context, tmp_path: Path, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    job_id = submit_command_job(ctx, tmp_path, "sleep 2", tasks=5)
    with caplog.at_level(logging.WARNING, logger="envloop"):
        worker, longest_gap, held = asyncio.run(_run(ctx, job_id, store_url, total=5))
    assert held >= HOLD_SEC - 0.1 > LEASE_SEC > LOCK_WAIT_SEC
    assert longest_gap < 1.0, f"the event loop stalled {longest_gap:.1f} s behind the lock"
    with ctx.store.read() as session:
        rows = session.execute(select(Trial.status, Trial.runs).where(Trial.job_id == job_id)).all()
        status = session.scalar(select(Job.status).where(Job.id == job_id))
    assert [tuple(row) for row in rows] == [("completed", 1)] * 5  # each run once, recorded once
    assert status == "completed" and worker.completed == 5
    assert "lease lost" not in caplog.text
    assert "trying again" in caplog.text  # the worker did wait out the lock, and said so
