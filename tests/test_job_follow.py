"""Following a job (`el job submit --wait`, `el job watch`) costs little next to the job it follows."""

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select, update

from envloop.cli.progress import POLL_MIN_SEC, follow, pause_before_next_look
from envloop.errors import NotFoundError
from envloop.local import LocalClient
from envloop.services import datasets, job_submission, jobs, profiles
from envloop.services.context import Context, open_context
from envloop.store.tables import Job, Trial
from envloop.wire import JobProgress
from tests.conftest import EXAMPLES, statements_run, write_profile


def _big_half_done_job(ctx: Context, tmp_path: Path) -> str:
    """1,000 trials, half of them completed with a reward, none running (no worker)."""
    datasets.push_dataset(ctx, EXAMPLES / "tasks", "demo")
    doc = profiles.read_profile_file(write_profile(tmp_path / "nop.json", {"AGENT_NAME": "nop"}))
    profiles.create_profile(ctx, "nop", "1", doc)
    job = job_submission.submit_job(
        ctx, job_submission.JobRequest(dataset="demo@1", profiles=["nop@1"], attempts=200)
    ).job
    with ctx.store.write() as session:
        session.execute(
            update(Trial)
            .where(Trial.job_id == job.id, Trial.attempt <= 100)
            .values(status="completed", reward=1.0)
        )
    return job.id


def _follow_while(
    ctx: Context, home: Path, job_id: str, meanwhile: Callable[[Context], None]
) -> tuple[JobProgress, float, list[tuple[float, str]]]:
    """Follow the job to its end while `meanwhile` runs on a thread with a context of its own (its
    own engine: its statements are not the follower's). Returns the last progress seen, the moment
    following ended, and each SELECT the follower ran with its moment."""

    def other_side() -> None:
        other = open_context(home)
        try:
            meanwhile(other)
        finally:
            other.close()

    thread = threading.Thread(target=other_side)
    with statements_run(ctx.store.engine) as ran:
        thread.start()
        try:
            final = follow(LocalClient.on_context(ctx), job_id)
            seen = time.monotonic()
        finally:
            thread.join()
    selects = [(moment, sql) for moment, sql, _ in ran if sql.lstrip().upper().startswith("SELECT")]
    return final, seen, selects


def test_following_reads_only_counts_looks_ever_less_often_and_sees_the_end_soon(
    ctx: Context, home: Path, tmp_path: Path
) -> None:
    job_id = _big_half_done_job(ctx, tmp_path)
    start = time.monotonic()
    cancelled: list[float] = []

    def cancel_later(other: Context) -> None:
        time.sleep(4.3)
        jobs.cancel_job(other, job_id)
        cancelled.append(time.monotonic())

    final, seen, selects = _follow_while(ctx, home, job_id, cancel_later)
    looks = [moment for moment, _ in selects]
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
    assert not [sql for _, sql in selects if "reward" in sql], selects


def _finish_at_a_steady_pace(
    job_id: str, steps: int, every_sec: float, ended: list[float]
) -> Callable[[Context], None]:
    """Complete the job's pending trials in `steps` equal batches, one every `every_sec`, the job
    itself with the last batch (as a worker's last settle does); its commit time goes into `ended`."""

    def finish(other: Context) -> None:
        with other.store.read() as session:
            pending = list(
                session.scalars(select(Trial.id).where(Trial.job_id == job_id, Trial.status == "pending"))
            )
        size = -(-len(pending) // steps)
        for step in range(steps):
            time.sleep(every_sec)
            with other.store.write() as session:
                batch = pending[step * size : (step + 1) * size]
                session.execute(
                    update(Trial).where(Trial.id.in_(batch)).values(status="completed", reward=1.0)
                )
                if step == steps - 1:
                    session.execute(update(Job).where(Job.id == job_id).values(status="completed"))
        ended.append(time.monotonic())

    return finish


def test_a_job_ending_at_a_steady_pace_is_seen_to_end_soon_after_with_a_few_more_looks(
    ctx: Context, home: Path, tmp_path: Path
) -> None:
    """A tenth of 4 s followed is 0.4 s between looks: without looking more often as the last
    trials end, the end would be seen up to that late, with at most two looks in its last 0.6 s."""
    job_id = _big_half_done_job(ctx, tmp_path)
    ended: list[float] = []
    finish = _finish_at_a_steady_pace(job_id, steps=100, every_sec=0.04, ended=ended)
    final, seen, selects = _follow_while(ctx, home, job_id, finish)
    looks = [moment for moment, _ in selects]
    assert final.status == "completed" and final.counts["completed"] == 1000
    assert seen - ended[0] < 0.3, seen - ended[0]
    assert sum(ended[0] - 0.6 <= t <= ended[0] for t in looks) >= 3, looks[-8:]
    assert len(looks) < 80, len(looks)  # looks stay few: not one per batch


def test_the_wait_shrinks_near_the_end_and_grows_back_while_nothing_ends() -> None:
    # Early on, the tenth of the time followed.
    assert pause_before_next_look(1.0, ended=0, left=100, still=0.0) == pytest.approx(0.1)
    assert pause_before_next_look(10.0, ended=10, left=990, still=0.0) == pytest.approx(1.0)
    # Near the end: half of what the pace so far says is left (9 s for 90 ended, 10 left: 0.5 s).
    assert pause_before_next_look(9.0, ended=90, left=10, still=0.0) == pytest.approx(0.5)
    assert pause_before_next_look(9.0, ended=999, left=1, still=0.0) == POLL_MIN_SEC
    assert pause_before_next_look(9.0, ended=1000, left=0, still=0.0) == POLL_MIN_SEC
    # A slow last trial: the wait grows with the time since a trial last ended, up to the tenth.
    assert pause_before_next_look(9.0, ended=999, left=1, still=0.2) == pytest.approx(0.2)
    assert pause_before_next_look(60.0, ended=999, left=1, still=50.0) == pytest.approx(2.0)
    assert pause_before_next_look(9.0, ended=1000, left=0, still=3.0) == pytest.approx(0.9)


def test_progress_of_an_unknown_job_is_a_clear_not_found(ctx: Context) -> None:
    with pytest.raises(NotFoundError, match="unknown job"):
        jobs.job_progress(ctx, "job_missing")
