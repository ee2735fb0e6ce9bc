"""Listing a job's trials: grid order (profile, task, attempt), filters, and pages of big jobs; and
reading one trial without more than the read needs."""

from pathlib import Path

import pytest

from envloop.errors import NotFoundError
from envloop.services import trial_reads, trials
from envloop.services.context import Context
from envloop.services.trace import load_outline
from envloop.services.trial_usage import TrialUsage, trial_usage
from tests.conftest import run_trials, submit_command_job
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


def test_reads_that_only_check_the_trial_leave_its_structured_result_unread(
    ctx: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logs, kept files, usage and a trajectory's outline ask only whether the trial is the
    project's: none of them fetches result.json from the artifacts (a download, on an object
    store); `get_trial` reads it, for the view it returns."""
    job_id = submit_command_job(ctx, tmp_path, "echo hello")
    run_trials(ctx, 1)
    [trial] = trials.list_trials(ctx, job_id)

    def unread(_ctx: Context, _trial_id: str) -> None:
        raise AssertionError("the structured result was read")

    monkeypatch.setattr(trial_reads, "read_structured", unread)
    assert trials.trial_logs(ctx, trial.id, "agent")["stdout"].startswith("hello")
    assert trials.list_artifacts(ctx, trial.id)
    assert trials.artifact_page(ctx, trial.id).total == len(trials.list_artifacts(ctx, trial.id))
    assert trial_usage(ctx, trial.id) == TrialUsage(usage={}, stop_reason=None)  # no model was called
    assert load_outline(ctx, trial.id) is not None
    with pytest.raises(AssertionError, match="the structured result was read"):
        trials.get_trial(ctx, trial.id)
    with pytest.raises(NotFoundError, match="unknown trial 'trl_missing'"):
        trials.trial_logs(ctx, "trl_missing", "agent")
