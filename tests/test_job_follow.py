"""Following a job (`el job submit --wait`, `el job watch`) costs little next to the job it follows."""

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, update

from envloop.cli.progress import follow
from envloop.local import LocalClient
from envloop.services import datasets, jobs, profiles
from envloop.services.context import Context, open_context
from envloop.services.errors import NotFoundError
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


def _cancel_later(home: Path, job_id: str, after_sec: float) -> threading.Thread:
    def cancel() -> None:
        time.sleep(after_sec)
        other = open_context(home)  # its own engine: its statements are not the follower's
        try:
            jobs.cancel_job(other, job_id)
        finally:
            other.close()

    thread = threading.Thread(target=cancel)
    thread.start()
    return thread


def test_following_reads_only_counts_and_looks_less_often_while_nothing_changes(
    ctx: Context, home: Path, tmp_path: Path
) -> None:
    job_id = _big_half_done_job(ctx, tmp_path)
    selects: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            selects.append(statement)

    event.listen(ctx.store.engine, "before_cursor_execute", record)
    canceller = _cancel_later(home, job_id, after_sec=3.0)
    try:
        final = follow(LocalClient.on_context(ctx), job_id)
    finally:
        canceller.join()
        event.remove(ctx.store.engine, "before_cursor_execute", record)
    assert final.status == "cancelled"
    assert final.counts["completed"] == 500 and final.counts["cancelled"] == 500
    # Polling every 0.2 s for ~3 s would be 15 looks or more; with backoff it is about 7.
    assert len(selects) <= 10, len(selects)
    # The result (rewards, per-task rows) is never built while following.
    assert not [s for s in selects if "reward" in s], selects


def test_progress_of_an_unknown_job_is_a_clear_not_found(ctx: Context) -> None:
    with pytest.raises(NotFoundError, match="unknown job"):
        jobs.job_progress(ctx, "job_missing")
