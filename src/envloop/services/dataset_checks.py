"""`el dataset check`: a dataset's health, run as an ordinary job of the built-in oracle and nop
profiles (so it is kept, listed and visible like any other job) and read back as one verdict per task.

The job carries the tag `health-check=NAME@N`: that is how the latest check of a revision is found,
and how a check is told apart from a job someone else ran with the same agents.
"""

from datetime import datetime
from typing import Any

from envloop.core.dataset_health import CheckedRun, DatasetHealth, TaskHealth, task_health
from envloop.core.status import TERMINAL, TrialStatus
from envloop.errors import NotFoundError, UserError
from envloop.services.context import Context
from envloop.services.datasets import get_dataset
from envloop.services.job_reads import get_job
from envloop.services.jobs import FAILED_BUILD, NothingToRun, list_jobs, submit_job
from envloop.services.profiles import create_profile
from envloop.services.trial_reads import list_trials
from envloop.wire.jobs import JobRequest, JobView, SubmitResult
from envloop.wire.profiles import ProfileDocument
from envloop.wire.trials import TrialView

CHECK_TAG = "health-check"
ORACLE_PROFILE = "el-check-oracle"
NOP_PROFILE = "el-check-nop"
_PROFILE_VERSION = "1"


def check_dataset(ctx: Context, ref: str, attempts: int = 3, environment: str | None = None) -> SubmitResult:
    """Submit the check of `ref`: the oracle and the nop agent, `attempts` runs each on every task.
    Tasks needing a feature the environment cannot honour are left out and named by the check."""
    dataset = get_dataset(ctx, ref).ref
    profiles = [
        _builtin_profile(ctx, name, agent)
        for name, agent in ((ORACLE_PROFILE, "oracle"), (NOP_PROFILE, "nop"))
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


def _builtin_profile(ctx: Context, name: str, agent: str) -> str:
    document = ProfileDocument.model_validate(
        {"schema_version": "envplatform.profile/v2", "spec": {"params": {"AGENT_NAME": agent}}}
    )
    return create_profile(ctx, name, _PROFILE_VERSION, document).ref


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
    oracle_ref, nop_ref = (f"{name}@{_PROFILE_VERSION}" for name in (ORACLE_PROFILE, NOP_PROFILE))
    runs: dict[tuple[str, str], list[CheckedRun]] = {}
    for trial in trials:
        runs.setdefault((trial.profile, trial.task), []).append(_run(trial))
    tasks: list[TaskHealth] = []
    for task in job.tasks:
        tasks.append(task_health(task, runs.get((oracle_ref, task), []), runs.get((nop_ref, task), [])))
    for skipped in job.skipped:
        tasks.append(task_health(skipped.task, [], [], unsupported=_left_out(skipped.reason)))
    finished = job.status in TERMINAL
    return DatasetHealth(
        job_id=job.id,
        dataset=job.dataset,
        environment=job.environment,
        attempts=job.attempts,
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
    )


def _phase_seconds(phases: list[dict[str, Any]]) -> dict[str, float]:
    seconds: dict[str, float] = {}
    for phase in phases:
        try:
            started = datetime.fromisoformat(str(phase["started_at"]))
            ended = datetime.fromisoformat(str(phase["ended_at"]))
        except (KeyError, ValueError):
            continue
        name = str(phase.get("name"))
        seconds[name] = seconds.get(name, 0.0) + (ended - started).total_seconds()
    return seconds
