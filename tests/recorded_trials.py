"""A job whose trials are recorded as a worker records them, each with the outcome a test chooses:
what the tests of a trial's record (flags, destinations) read back through every surface."""

from collections.abc import Callable
from pathlib import Path

from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.runners.verdict import settle_outcome
from envloop.services import datasets, job_submission, profiles
from envloop.services.context import Context
from envloop.store import queue
from tests.conftest import make_task, write_profile


def recorded_job(
    ctx: Context, tmp_path: Path, secret: str, outcome_of: Callable[[str], TrialOutcome]
) -> tuple[str, dict[str, str]]:
    """A job of two tasks, `a` and `b`, run by a nop profile whose secret is `secret`, each trial
    finished with `outcome_of(task)` settled as the worker settles it; (job ID, trial IDs by task)."""
    for name in ("a", "b"):
        make_task(tmp_path / "tasks", name)
    ref = datasets.push_dataset(ctx, tmp_path / "tasks", "recorded").ref
    document = profiles.read_profile_file(write_profile(tmp_path / "p.json", {"AGENT_NAME": "nop"}))
    profiles.create_profile(ctx, "team/nop", "1", document)
    job = job_submission.submit_job(ctx, job_submission.JobRequest(dataset=ref, profiles=["team/nop@1"])).job
    ids = {}
    for claimed in queue.claim(ctx.store, "test-worker", 10, 3600):
        spec = TrialSpec(
            job_id=job.id,
            trial_id=claimed.trial_id,
            task_name=claimed.task_name,
            attempt=1,
            profile_ref="team/nop@1",
            runner="envloop/shell@1",
            params={},
            secret_values=(secret,),
            instance_root=tmp_path,
            artifacts_dir=tmp_path,
        )
        assert queue.finish(ctx.store, claimed, settle_outcome(outcome_of(claimed.task_name), spec))
        ids[claimed.task_name] = claimed.trial_id
    return job.id, ids
