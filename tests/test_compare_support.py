"""Recorded runs for the comparison suites: real datasets, profiles and jobs in a real store.

Trials are claimed and finished through the store's queue, exactly as a worker records them; the
sandbox step is skipped so a suite can lay down hundreds of chosen rewards in milliseconds. Where
a verifier would have written `/logs/verifier/result.json`, the file is put where the runner keeps
it: the trial's artifacts.
"""

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from sqlalchemy import select

from envloop.core.trial import TrialOutcome
from envloop.services import datasets, job_submission, profiles
from envloop.services.context import Context
from envloop.services.results import job_result
from envloop.store import queue
from envloop.store.tables import Profile
from tests.conftest import make_task, write_profile

# What one attempt yields: a reward, None (finished without a reward), "running" (left unfinished),
# or a whole outcome as a worker records it (a failure with its error type).
Attempt = float | None | str | TrialOutcome
Rewards = Callable[[str, str, int], Attempt]
Structured = Callable[[str, str, int], object]


def push_tasks(ctx: Context, root: Path, name: str, tasks: Sequence[str], variant: str = "") -> str:
    """A dataset revision of small Harbor tasks; `variant` changes every task's content (digest)."""
    folder = root / f"{name}-{variant or 'base'}"
    for task in tasks:
        make_task(folder, task, solve=f"# {variant}" if variant else "")
    return datasets.push_dataset(ctx, folder, name).ref


def make_profile(ctx: Context, root: Path, name: str, params: dict[str, str] | None = None) -> str:
    path = write_profile(root / f"{name.replace('/', '_')}.json", params or {"AGENT_NAME": "nop"})
    return profiles.create_profile(ctx, name, "1", profiles.read_profile_file(path)).ref


def run_job(
    ctx: Context,
    dataset: str,
    profile_refs: Sequence[str],
    attempts: int,
    rewards: Rewards,
    structured: Structured | None = None,
    tasks: list[str] | None = None,
) -> str:
    """Submit a job and record every attempt's outcome as a worker would; returns the job ID."""
    job = job_submission.submit_job(
        ctx,
        job_submission.JobRequest(
            dataset=dataset, profiles=list(profile_refs), attempts=attempts, tasks=tasks
        ),
    ).job
    with ctx.store.read() as session:
        refs = {p.id: f"{p.name}@{p.version}" for p in session.scalars(select(Profile))}
    claimed = queue.claim(ctx.store, "test-worker", 100_000, 3600)
    for trial in claimed:
        ref = refs[trial.profile_id]
        value = rewards(ref, trial.task_name, trial.attempt)
        if value == "running":
            continue
        written = False
        if structured is not None:
            document = structured(ref, trial.task_name, trial.attempt)
            if document is not None:
                written = True
                target = ctx.artifacts.trial_dir(trial.trial_id) / "verifier" / "result.json"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(document if isinstance(document, str) else json.dumps(document))
        if isinstance(value, TrialOutcome):
            assert queue.finish(ctx.store, trial, value)
            continue
        reward = None if value is None else float(value)
        outcome = TrialOutcome(  # as a worker does, note that the artifacts hold a result.json
            status="completed",
            reward=reward,
            reward_note=None if reward is not None else "no reward",
            structured_result=written,
        )
        assert queue.finish(ctx.store, trial, outcome)
    return job.id


def test_recorded_rewards_come_back_through_the_job_result(ctx: Context, tmp_path: Path) -> None:
    dataset = push_tasks(ctx, tmp_path, "support", ["a", "b"])
    profile = make_profile(ctx, tmp_path, "support/p")
    table = {("a", 1): 1.0, ("a", 2): None, ("b", 1): 0.5, ("b", 2): "running"}
    job_id = run_job(ctx, dataset, [profile], 2, lambda _p, task, attempt: table[(task, attempt)])
    result = job_result(ctx, job_id)
    assert result.status == "running"
    assert result.profiles[profile].members[0].attempts == [1.0, "invalid"]
    assert result.profiles[profile].members[1].attempts == [0.5, "waiting"]
