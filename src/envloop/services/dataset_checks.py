"""`el dataset check`: a dataset's health, run as an ordinary job of the built-in oracle and nop
profiles (so it is kept, listed and visible like any other job) and read back as one verdict per task.

The job carries the tag `health-check=NAME@N`: that is how the latest check of a revision is found,
and how a check is told apart from a job someone else ran with the same agents.

The oracle's profile asks the runner to have the verifier judge each final state `verifier_runs`
times (`runners.verifier_runs`); its version is that number (`el-check-oracle@3`), so a check of
earlier days, `el-check-oracle@1`, reads as what it was: one verdict per final state.
"""

from datetime import datetime
from typing import Any

from envloop.core.dataset_health import CheckedRun, DatasetHealth, TaskHealth, task_health
from envloop.core.status import TERMINAL, TrialStatus
from envloop.core.trial import VERIFIER_FLAKY_FLAG, VERIFIER_RUNS_PARAM
from envloop.errors import NotFoundError, UserError
from envloop.services.context import Context
from envloop.services.datasets import get_dataset
from envloop.services.job_reads import get_job
from envloop.services.job_submission import FAILED_BUILD, NothingToRun, submit_job
from envloop.services.jobs import list_jobs
from envloop.services.profiles import create_profile
from envloop.services.trial_reads import list_trials
from envloop.wire.jobs import JobRequest, JobView, SubmitResult
from envloop.wire.profiles import ProfileDocument
from envloop.wire.trials import TrialView

CHECK_TAG = "health-check"
ORACLE_PROFILE = "el-check-oracle"
NOP_PROFILE = "el-check-nop"
_NOP_VERSION = "1"


def check_dataset(
    ctx: Context, ref: str, attempts: int = 3, environment: str | None = None, verifier_runs: int = 3
) -> SubmitResult:
    """Submit the check of `ref`: the oracle and the nop agent, `attempts` runs each on every task,
    the verifier judging each of the oracle's final states `verifier_runs` times. Tasks needing a
    feature the environment cannot honour are left out and named by the check."""
    dataset = get_dataset(ctx, ref).ref
    again = {VERIFIER_RUNS_PARAM: str(verifier_runs)} if verifier_runs > 1 else {}
    profiles = [
        _builtin_profile(ctx, ORACLE_PROFILE, str(verifier_runs), {"AGENT_NAME": "oracle", **again}),
        _builtin_profile(ctx, NOP_PROFILE, _NOP_VERSION, {"AGENT_NAME": "nop"}),
    ]
    request = JobRequest.model_validate(
        {
            "dataset": dataset,
            "profiles": profiles,
            "attempts": attempts,
            "environment": environment,
            "skip_unsupported": True,
            "tags": {CHECK_TAG: dataset},
            "name": f"health check of {dataset}",
        }
    )
    try:
        return submit_job(ctx, request)
    except NothingToRun:
        where = f"the {environment} environment" if environment else "this worker's environment"
        raise UserError(
            f"no task of {dataset} can be checked in {where}: each needs a feature it cannot honour or "
            f"has an image that does not build (el dataset show {dataset}, el dataset build {dataset})"
        ) from None


def _builtin_profile(ctx: Context, name: str, version: str, params: dict[str, str]) -> str:
    document = ProfileDocument.model_validate(
        {"schema_version": "envplatform.profile/v2", "spec": {"params": params}}
    )
    return create_profile(ctx, name, version, document).ref


def dataset_check(ctx: Context, job_id: str) -> DatasetHealth:
    """The verdict on every task of the check job `job_id` (not final while a run is still to end)."""
    job = get_job(ctx, job_id)
    if CHECK_TAG not in job.tags:
        raise UserError(f"job {job_id} is not a dataset check (no {CHECK_TAG} tag)")
    return _health(job, list_trials(ctx, job_id))


def latest_dataset_check(ctx: Context, ref: str) -> DatasetHealth:
    """The newest check of the revision `ref` names."""
    dataset = get_dataset(ctx, ref).ref
    found = list_jobs(ctx, tags={CHECK_TAG: dataset}, limit=1)
    if not found:
        raise NotFoundError(f"{dataset} has not been checked (el dataset check {dataset})")
    return dataset_check(ctx, found[0].id)


def _health(job: JobView, trials: list[TrialView]) -> DatasetHealth:
    runs: dict[tuple[str, str], list[CheckedRun]] = {}
    for trial in trials:
        name = trial.profile.partition("@")[0]
        runs.setdefault((name, trial.task), []).append(_run(trial))
    tasks: list[TaskHealth] = []
    for task in job.tasks:
        tasks.append(
            task_health(task, runs.get((ORACLE_PROFILE, task), []), runs.get((NOP_PROFILE, task), []))
        )
    for skipped in job.skipped:
        tasks.append(task_health(skipped.task, [], [], unsupported=_left_out(skipped.reason)))
    finished = job.status in TERMINAL
    version = next(
        (ref.partition("@")[2] for ref in job.profiles if ref.startswith(f"{ORACLE_PROFILE}@")), ""
    )
    return DatasetHealth(
        job_id=job.id,
        dataset=job.dataset,
        environment=job.environment,
        attempts=job.attempts,
        verifier_runs=int(version) if version.isdigit() else 1,
        status=job.status,
        finished=finished,
        healthy=finished and all(task.healthy for task in tasks),
        tasks=tasks,
    )


def _left_out(reason: str) -> str:
    """Why the job gave a task no runs: its image is recorded as failing to build, or it needs a
    feature the environment cannot honour."""
    if reason.startswith(FAILED_BUILD):
        return f"image does not build: {reason.removeprefix(FAILED_BUILD)}"
    return f"not run: {reason}"


def _run(trial: TrialView) -> CheckedRun:
    pending = trial.status not in TERMINAL
    scored = trial.reward is not None and not trial.invalidated
    error = trial.error_message or (f"{trial.error_type}" if trial.error_type else None)
    if trial.status == TrialStatus.CANCELLED:
        error = "cancelled"
    elif trial.invalidated:
        error = f"invalidated: {trial.invalidated_reason}"
    return CheckedRun(
        attempt=trial.attempt,
        reward=trial.reward if scored else None,
        error=error if not scored else None,
        pending=pending,
        phases=_phase_seconds(trial.phases),
        flaky=next((flag.detail for flag in trial.flags if flag.kind == VERIFIER_FLAKY_FLAG), None),
    )


def _phase_seconds(phases: list[dict[str, Any]]) -> dict[str, float]:
    """The longest run of each phase: a verifier judging one state three times runs three times."""
    seconds: dict[str, float] = {}
    for phase in phases:
        try:
            started = datetime.fromisoformat(str(phase["started_at"]))
            ended = datetime.fromisoformat(str(phase["ended_at"]))
        except (KeyError, ValueError):
            continue
        name = str(phase.get("name"))
        seconds[name] = max(seconds.get(name, 0.0), (ended - started).total_seconds())
    return seconds
