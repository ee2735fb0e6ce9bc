"""Listing a job's trials: grid order (profile, task, attempt), filters, and pages of big jobs."""

from pathlib import Path

from envloop.services import trials
from envloop.services.context import Context
from tests.test_compare_support import make_profile, push_tasks, run_job


def test_pages_and_filters_keep_grid_order(ctx: Context, tmp_path: Path) -> None:
    dataset = push_tasks(ctx, tmp_path, "paged", ["a", "b", "c"])
    one, two = make_profile(ctx, tmp_path, "paged/one"), make_profile(ctx, tmp_path, "paged/two")
    job_id = run_job(
        ctx, dataset, [one, two], 3, lambda _p, t, attempt: "running" if t == "b" and attempt > 1 else 1.0
    )
    every = trials.list_trials(ctx, job_id)
    grid = [(v.profile, v.task, v.attempt) for v in every]
    assert len(grid) == 18 and grid == sorted(grid, key=lambda g: (g[0] != one, g[1], g[2]))
    assert trials.list_trials(ctx, job_id, limit=4, offset=7) == every[7:11]
    running = trials.list_trials(ctx, job_id, status="running")
    assert [(v.profile, v.task, v.attempt) for v in running] == [
        (ref, "b", attempt) for ref in (one, two) for attempt in (2, 3)
    ]
    page = trials.list_trials(ctx, job_id, task="b", limit=2, offset=2)
    assert [(v.profile, v.attempt) for v in page] == [(one, 3), (two, 1)]
    assert trials.list_trials(ctx, job_id, limit=5, offset=100) == []
