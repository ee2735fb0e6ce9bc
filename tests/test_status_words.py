"""One vocabulary for how attempts ended: a cancelled attempt reads "cancelled" in `el job result`
and its JSON as in the console, and a finished job that reads `failed` or `cancelled` says why in
one sentence (a failed trial can still carry the verifier's reward)."""

from pathlib import Path

from envloop.core.trial import TrialError, TrialOutcome
from envloop.services import job_submission
from envloop.services.context import Context
from envloop.services.diagnosis import job_diagnosis
from envloop.services.results import job_result
from envloop.store import queue
from tests.conftest import El
from tests.test_compare_support import make_profile, push_tasks


def _claimed_job(ctx: Context, tmp_path: Path, name: str) -> tuple[str, str, list[queue.ClaimedTrial]]:
    dataset = push_tasks(ctx, tmp_path, name, ["t1", "t2"])
    profile = make_profile(ctx, tmp_path, f"team/{name}")
    job = job_submission.submit_job(
        ctx, job_submission.JobRequest(dataset=dataset, profiles=[profile])
    ).job.id
    claimed = sorted(queue.claim(ctx.store, "w", 10, 60), key=lambda t: t.task_name)
    return job, profile, claimed


def test_a_cancelled_attempt_reads_cancelled_never_invalid(el: El, ctx: Context, tmp_path: Path) -> None:
    job, profile, (first, second) = _claimed_job(ctx, tmp_path, "words")
    assert queue.finish(ctx.store, first, TrialOutcome(status="completed", reward=1.0))
    assert queue.finish(ctx.store, second, TrialOutcome(status="cancelled"))
    metrics = job_result(ctx, job).profiles[profile]
    assert metrics.members[1].attempts == ["cancelled"]
    counts = metrics.score_counts
    assert (counts.cancelled, counts.invalid, counts.missing) == (1, 0, 1)
    text = el.ok("job", "result", job).stdout
    assert "cancelled" in text and "invalid" not in text
    assert job_diagnosis(ctx, job).status_note == "cancelled: 1 attempt stopped before it finished"


def test_a_failed_job_whose_every_attempt_scored_says_why_it_failed(ctx: Context, tmp_path: Path) -> None:
    job, profile, claimed = _claimed_job(ctx, tmp_path, "timeouts")
    for trial in claimed:
        error = TrialError(type="agent_timeout", message="the agent exceeded its 60 s timeout")
        assert queue.finish(ctx.store, trial, TrialOutcome(status="failed", error=error, reward=0.0))
    result = job_result(ctx, job)
    assert result.status == "failed" and result.profiles[profile].score_counts.scored == 2
    assert job_diagnosis(ctx, job).status_note == (
        "failed: 2 trials ended with an error (agent_timeout 2); "
        "each still has a counted reward (the verifier scored what the agent left)"
    )
