"""The queue under truly concurrent writers: PostgreSQL runs claims and results in parallel, where
SQLite serializes them; both must keep the same promises."""

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from envloop.core.trial import TrialOutcome
from envloop.services import datasets, job_submission, jobs, profiles
from envloop.services.context import Context
from envloop.store import queue
from envloop.store.queue import ClaimedTrial
from tests.conftest import make_task, write_profile
from tests.pg import BACKENDS

pytestmark = pytest.mark.parametrize("store_url", BACKENDS, indirect=True)


def _job(ctx: Context, tmp_path: Path, tasks: int, attempts: int, concurrency: int | None = None) -> str:
    src = tmp_path / f"src{time.monotonic_ns()}"
    for i in range(tasks):
        make_task(src, f"t{i}")
    ref = datasets.push_dataset(ctx, src, f"ds{time.monotonic_ns()}").ref
    doc = profiles.read_profile_file(write_profile(tmp_path / "p.json", {"AGENT_NAME": "nop"}))
    profiles.create_profile(ctx, "p", "1", doc)
    request = job_submission.JobRequest(
        dataset=ref, profiles=["p@1"], attempts=attempts, concurrency=concurrency
    )
    return job_submission.submit_job(ctx, request).job.id


def _all_at_once(count: int, work: Callable[[int], None]) -> None:
    """Run `work(i)` on `count` threads released together; re-raise the first failure."""
    barrier = threading.Barrier(count)
    failures: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            work(i)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def _claim_at_once(ctx: Context, claimers: int) -> list[ClaimedTrial]:
    claimed: list[ClaimedTrial] = []
    _all_at_once(claimers, lambda i: claimed.extend(queue.claim(ctx.store, f"w{i}", 10, lease_ttl=30)))
    return claimed


def _finish_at_once(ctx: Context, claimed: list[ClaimedTrial]) -> None:
    outcome = TrialOutcome(status="completed", reward=1.0)
    _all_at_once(len(claimed), lambda i: queue.finish(ctx.store, claimed[i], outcome))


def test_concurrent_claimers_never_exceed_a_jobs_concurrency(ctx: Context, tmp_path: Path) -> None:
    job_id = _job(ctx, tmp_path, tasks=6, attempts=4, concurrency=3)
    done = 0
    while done < 24:
        claimed = _claim_at_once(ctx, claimers=6)
        assert len(claimed) == 3
        assert jobs.get_job(ctx, job_id).counts["running"] == 3
        _finish_at_once(ctx, claimed)
        done += 3
    assert jobs.get_job(ctx, job_id).status == "completed"


def test_a_job_ends_when_its_last_trials_finish_at_the_same_moment(ctx: Context, tmp_path: Path) -> None:
    for _ in range(10):
        job_id = _job(ctx, tmp_path, tasks=4, attempts=1)
        _finish_at_once(ctx, queue.claim(ctx.store, "w", 4, lease_ttl=30))
        view = jobs.get_job(ctx, job_id)
        assert (view.status, view.counts["completed"]) == ("completed", 4)


def test_workers_settling_across_many_jobs_at_once_record_every_result_once(
    ctx: Context, tmp_path: Path
) -> None:
    job_ids = [_job(ctx, tmp_path, tasks=3, attempts=3) for _ in range(4)]
    recorded: list[bool] = []

    def worker(i: int) -> None:
        held: list[ClaimedTrial] = []
        while True:
            finished = [(c, TrialOutcome(status="completed", reward=1.0)) for c in held]
            ok, held = queue.settle(ctx.store, f"w{i}", finished, 2, lease_ttl=30)
            recorded.extend(ok)
            if not held:
                return

    _all_at_once(6, worker)
    assert recorded == [True] * 36
    for job_id in job_ids:
        assert jobs.get_job(ctx, job_id).counts["completed"] == 9
        assert jobs.get_job(ctx, job_id).status == "completed"
