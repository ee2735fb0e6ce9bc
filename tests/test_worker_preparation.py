"""Preparing claimed trials: specs are built in the worker's one trip off the event loop per wake-up;
one that cannot be built there is prepared again alone, and fails with a reason only if that fails."""

import asyncio
from pathlib import Path

import pytest

from envloop.scheduling.trial_specs import TrialSpecs
from envloop.scheduling.worker import Worker, WorkerConfig
from envloop.services import datasets, job_submission, profiles, trials
from envloop.services.context import Context
from tests.conftest import make_task, write_profile

SOLVES = 'touch "${ENVLOOP_APP_DIR:-/app}/done"'


def _submit(ctx: Context, tmp_path: Path, tasks: int) -> str:
    for i in range(tasks):
        make_task(tmp_path / "src", f"t{i}", solve=SOLVES)
    ref = datasets.push_dataset(ctx, tmp_path / "src", "ds").ref
    doc = profiles.read_profile_file(write_profile(tmp_path / "p.json", {"AGENT_NAME": "oracle"}))
    profiles.create_profile(ctx, "oracle", "1", doc)
    return job_submission.submit_job(
        ctx, job_submission.JobRequest(dataset=ref, profiles=["oracle@1"])
    ).job.id


def _run(ctx: Context, trials_wanted: int) -> Worker:
    worker = Worker(ctx, WorkerConfig(capacity=2, idle_poll=0.01))
    asyncio.run(worker.run(until=lambda: worker.completed >= trials_wanted))
    return worker


def test_a_spec_that_fails_once_is_prepared_again_and_the_trial_runs(
    ctx: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = _submit(ctx, tmp_path, tasks=3)
    build = TrialSpecs.build
    failed: list[str] = []

    def flaky(self: TrialSpecs, claimed: object, run_id: str) -> object:
        if not failed:
            failed.append(run_id)
            raise OSError("a moment's trouble")
        return build(self, claimed, run_id)  # type: ignore[arg-type]

    monkeypatch.setattr(TrialSpecs, "build", flaky)
    _run(ctx, 3)
    assert failed
    rows = trials.list_trials(ctx, job_id)
    assert [(t.status, t.reward) for t in rows] == [("completed", 1.0)] * 3


def test_a_trial_that_cannot_be_prepared_fails_with_the_reason_and_no_host_path(
    ctx: Context, tmp_path: Path
) -> None:
    job_id = _submit(ctx, tmp_path, tasks=2)
    blocked, free = trials.list_trials(ctx, job_id)
    # A file where the first run of one trial keeps its files: its spec can never be built.
    ctx.artifacts.staging_dir(f"{blocked.id}.r1").write_text("not a directory")
    _run(ctx, 2)
    statuses = {t.id: (t.status, t.reward) for t in trials.list_trials(ctx, job_id)}
    assert statuses == {blocked.id: ("failed", None), free.id: ("completed", 1.0)}
    trial = trials.get_trial(ctx, blocked.id)
    assert trial.error_type == "infrastructure_error"
    assert trial.error_message is not None
    assert trial.error_message.startswith("could not prepare trial:")
    assert str(tmp_path) not in trial.error_message
