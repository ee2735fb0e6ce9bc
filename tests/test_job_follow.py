"""Following a job (`el job submit --wait`, `el job watch`) costs little next to the job it follows."""

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, update

from envloop.cli.progress import follow
from envloop.errors import NotFoundError
from envloop.local import LocalClient
from envloop.services import datasets, jobs, profiles
from envloop.services.context import Context, open_context
from envloop.store.tables import Trial
from tests.conftest import EXAMPLES, write_profile


def _big_half_done_job(ctx: Context, tmp_path: Path) -> str:
    """1,000 trials, half of them completed with a reward, none running (no worker)."""
    datasets.push_dataset(ctx, EXAMPLES / "tasks", "demo")
    doc = profiles.read_profile_file(write_profile(tmp_path / "nop.json", {"AGENT_NAME": "nop"}))
    profiles.create_profile(ctx, "nop", "1", doc)
    job = jobs.submit_job(ctx, jobs.JobRequest(dataset="demo@1", profiles=["nop@1"], attempts=200)).job
    with ctx.store.write() as session:
        session.execute(
            update(Trial)
            .where(Trial.job_id == job.id, Trial.attempt <= 100)
            .values(status="completed", reward=1.0)
        )
    return job.id


def _cancel_later(
    home: Path, job_id: str, after_sec: float, done: list[float] | None = None
) -> threading.Thread:
    """Cancel the job after `after_sec`; the moment the cancel is committed goes into `done`."""

    def cancel() -> None:
        time.sleep(after_sec)
        other = open_context(home)  # its own engine: its statements are not the follower's
        try:
            jobs.cancel_job(other, job_id)
            if done is not None:
                done.append(time.monotonic())
        finally:
            other.close()

    thread = threading.Thread(target=cancel)
    thread.start()
    return thread


def test_following_reads_only_counts_looks_ever_less_often_and_sees_the_end_soon(
    ctx: Context, home: Path, tmp_path: Path
) -> None:
    job_id = _big_half_done_job(ctx, tmp_path)
    looks: list[float] = []
    selects: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            selects.append(statement)
            looks.append(time.monotonic())

    event.listen(ctx.store.engine, "before_cursor_execute", record)
    start = time.monotonic()
    cancelled: list[float] = []
    canceller = _cancel_later(home, job_id, after_sec=4.3, done=cancelled)
    try:
        final = follow(LocalClient.on_context(ctx), job_id)
        seen = time.monotonic()
    finally:
        canceller.join()
        event.remove(ctx.store.engine, "before_cursor_execute", record)
    assert final.status == "cancelled"
    assert final.counts["completed"] == 500 and final.counts["cancelled"] == 500
    # The gaps between looks grow with the time followed (a tenth of it): from 2 s to 4 s that is
    # about 7 looks, where polling every 0.1 s would make 20; the first half holds the rest.
    halfway = start + 2.0
    early, late = sum(t < halfway for t in looks), sum(t >= halfway for t in looks)
    assert late <= 10 and late < early, (early, late)
    # The end is seen within a tenth of the time followed (plus a query), not seconds later.
    assert seen - cancelled[0] < 1.0, seen - cancelled[0]
    # The result (rewards, per-task rows) is never built while following.
    assert not [s for s in selects if "reward" in s], selects


def test_progress_of_an_unknown_job_is_a_clear_not_found(ctx: Context) -> None:
    with pytest.raises(NotFoundError, match="unknown job"):
        jobs.job_progress(ctx, "job_missing")
