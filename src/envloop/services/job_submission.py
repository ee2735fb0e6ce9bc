"""Submitting a job: the request checked whole, then the job and all of its trials written
pending in one transaction, so a refused submission (or a crash during one) leaves nothing behind.

Everything is checked before anything is created: the dataset's pinned revision and runner, the
environment, each profile's params against the runner and the tasks' needs, and the tasks that
cannot run here (an unsupported feature, a missing image, a failed build), each refusing the job
or, with skip_unsupported, left out and recorded. A request ID makes a submission idempotent.

Kept apart from `envloop.services.jobs` (listing, following, cancelling, exporting jobs): this is
the one path that checks a request and creates rows, and the only one that loads the runners, which
a reader of jobs never pays for. Why a job is queued this way: docs/design/queue-and-leases.md.
"""

import hashlib
import json
from datetime import UTC, datetime
from itertools import islice
from typing import cast

from sqlalchemy import JSON, Insert, Table, insert, literal_column, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from envloop.core.ids import new_id, new_ids
from envloop.core.status import JobStatus
from envloop.errors import ConflictError, UserError
from envloop.services.context import Context
from envloop.services.datasets import dataset_members, member_features, resolve_dataset
from envloop.services.job_reads import job_views
from envloop.services.missing_images import tasks_missing_images
from envloop.services.profiles import resolve_profile
from envloop.services.refs import dataset_ref
from envloop.services.unsupported import unsupported_tasks
from envloop.store.reads import SessionReads
from envloop.store.secrets import resolved_params
from envloop.store.tables import Dataset, DatasetMember, Job, JobProfile, Profile, Trial
from envloop.wire.jobs import JOB_CONFIG_SCHEMA, MAX_ATTEMPTS, JobRequest, SkippedTask, SubmitResult

# The models this module takes and returns are defined in envloop.wire (light to import) and
# re-exported here.
__all__ = ["JOB_CONFIG_SCHEMA", "MAX_ATTEMPTS", "JobRequest", "SubmitResult"]


FAILED_BUILD = "its image failed to build: "
"""How the reason of a task left out for its recorded build failure begins (the failure follows)."""


class NothingToRun(UserError):
    """Every selected task was left out of the job (--skip-unsupported): there is no trial to create."""


def _request_digest(request: JobRequest) -> str:
    # A request that names no environment, name, note or setup timeout (or skips nothing) digests as
    # it did before jobs could have them.
    fields = ("environment", "name", "note", "agent_setup_timeout_sec")
    unset = {field for field in fields if getattr(request, field) is None}
    if not request.skip_unsupported:
        unset.add("skip_unsupported")
    if request.verifier_environment == "task":
        unset.add("verifier_environment")
    body = request.model_dump(mode="json", exclude={"request_id", *unset})
    return "sha256:" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _select_tasks(request: JobRequest, members: list[str], ref: str) -> list[str]:
    if request.tasks is None:
        return members
    known = set(members)
    unknown = [t for t in request.tasks if t not in known]
    if unknown:
        raise UserError(f"dataset {ref} has no task {unknown[0]!r}")
    chosen = set(request.tasks)
    return [m for m in members if m in chosen]


def _validate(
    session: Session, ctx: Context, request: JobRequest
) -> tuple[Dataset, list[Profile], list[str], list[str], list[SkippedTask]]:
    """Everything is checked before anything is created; returns dataset, profiles, tasks, warnings
    and the tasks left out."""
    dataset = resolve_dataset(session, ctx.project_id, request.dataset)
    ref = dataset_ref(dataset.name, dataset.version)
    if "@" not in request.dataset:
        # Which revision runs must be chosen, never implied: the newest changes under a script.
        raise UserError(
            f"dataset {request.dataset!r} names no revision: give {ref}, or "
            f"{dataset.name}@latest for the newest revision (now {ref})"
        )
    # The runners (and the sandbox and agents behind them) load when a job is submitted, so that
    # reading jobs, results and trials never pays for them.
    from envloop.runners.params import check_params, unread_params  # noqa: PLC0415
    from envloop.runners.registry import UnknownRunnerError, get_runner  # noqa: PLC0415
    from envloop.services.components import check_environment  # noqa: PLC0415

    try:
        runner = get_runner(dataset.runner)
    except UnknownRunnerError:
        raise UserError(
            f"dataset {ref} is pinned to runner {dataset.runner}, which this envloop cannot run"
        ) from None
    if request.environment is not None:
        check_environment(request.environment)
    if len(set(request.profiles)) != len(request.profiles):
        raise UserError("the same profile is given twice")
    profiles = [resolve_profile(session, ctx.project_id, p) for p in request.profiles]
    members = dataset_members(session, dataset.id)
    tasks = _select_tasks(request, [m.name for m in members], ref)
    if not tasks:
        raise UserError(f"dataset {ref} has no tasks to run")
    warnings: list[str] = []
    skipped: list[SkippedTask] = []
    if dataset.kind == "harbor":
        tasks, skipped = _leave_out_unsupported(ctx, request, members, tasks, warnings)
        if not tasks:
            raise NothingToRun(f"every selected task of {ref} was left out (--skip-unsupported): none to run")
    chosen = set(tasks)
    required = {m.name: set(m.requires) for m in members if m.name in chosen and m.requires}
    used_by_tasks = set().union(*required.values())
    for profile, pref in zip(profiles, request.profiles, strict=True):
        params = resolved_params(session, profile, ctx.home)
        problems = check_params(runner, params, hidden=profile.secret_names)
        if problems:
            raise UserError(f"profile {pref} cannot run with {runner.ref}: {problems[0]}")
        for task, names in required.items():
            missing = sorted(names - params.keys())
            if missing and not request.skip_unsupported:
                raise UserError(
                    f"task {task} needs {', '.join(missing)} (referenced in its task.toml env); "
                    f"profile {pref} does not provide it (or pass --skip-unsupported to run the other tasks)"
                )
            if missing and task in tasks:
                reason = (
                    f"needs {', '.join(missing)} (its task.toml env), which profile {pref} does not provide"
                )
                skipped.append(SkippedTask(task=task, reason=reason))
                warnings.append(f"task {task} not run: {reason}")
                tasks = [t for t in tasks if t != task]
        unread = unread_params(runner, params)
        ignored = set(unread.names) - used_by_tasks
        if ignored:
            warnings.append(
                f"profile {pref}: {unread.ignored_by} does not read {', '.join(sorted(ignored))} (no effect)"
            )
    if request.environment is not None and dataset.kind != "harbor":
        warnings.append(
            f"--environment {request.environment}: {ref} holds chat rows, which run in no environment"
        )
    if not tasks:
        raise NothingToRun(f"every selected task of {ref} was left out (--skip-unsupported): none to run")
    return dataset, profiles, tasks, warnings, skipped


def _leave_out_unsupported(
    ctx: Context, request: JobRequest, members: list[DatasetMember], tasks: list[str], warnings: list[str]
) -> tuple[list[str], list[SkippedTask]]:
    """The tasks left to run and those left out: a task needing a feature the job's environment
    cannot give, an image this machine cannot have, or whose image failed to build, refuses the job
    unless --skip-unsupported."""
    chosen_members = [m for m in members if m.name in set(tasks)]
    skipped = unsupported_tasks(chosen_members, request.environment, request.skip_unsupported, warnings)
    left_out = {s.task for s in skipped}
    in_containers = _in_containers([m for m in chosen_members if m.name not in left_out], request)
    skipped += tasks_missing_images(ctx, in_containers, request.skip_unsupported, warnings)
    left_out = {s.task for s in skipped}
    failed = _failed_builds(ctx, [m for m in in_containers if m.name not in left_out])
    if failed and request.skip_unsupported:
        skipped += failed
        warnings += [f"task {item.task} not run: {item.reason}" for item in failed]
        left_out |= {item.task for item in failed}
    elif failed:
        _refuse_failed_builds(failed)
    return [t for t in tasks if t not in left_out], skipped


def _in_containers(members: list[DatasetMember], request: JobRequest) -> list[DatasetMember]:
    """The tasks the job would run in a container: all of them with --environment docker, those
    that need one with auto."""
    if request.environment == "docker":
        return members
    if request.environment == "auto":
        return [m for m in members if any(f.environments == ["docker"] for f in member_features(m) or [])]
    return []


def _failed_builds(ctx: Context, in_containers: list[DatasetMember]) -> list[SkippedTask]:
    """Tasks whose image is recorded as failing to build, among those the job would run in a
    container. Each of their trials could only end in an environment error."""
    if not in_containers:
        return []
    from envloop.services.builds import task_build  # noqa: PLC0415 - loads the Docker environment

    failed = []
    for member in in_containers:
        record = task_build(ctx, member.digest)
        if record is not None and record.status == "failed":
            failed.append(SkippedTask(task=member.name, reason=f"{FAILED_BUILD}{record.reason}"))
    return failed


def _refuse_failed_builds(failed: list[SkippedTask]) -> None:
    shown = "; ".join(f"{item.task} ({item.reason.removeprefix(FAILED_BUILD)})" for item in failed[:5])
    shown += f"; and {len(failed) - 5} more" if len(failed) > 5 else ""
    raise UserError(
        f"{len(failed)} task(s) whose image failed to build cannot run in docker: {shown} "
        "(fix the Dockerfile and push a new revision, rebuild with el dataset build --force, or pass "
        "--skip-unsupported to run the other tasks)"
    )


def submit_job(ctx: Context, request: JobRequest) -> SubmitResult:
    digest = _request_digest(request)
    try:
        with ctx.store.write() as session:
            if request.request_id is not None:
                earlier = session.scalar(
                    select(Job).where(Job.project_id == ctx.project_id, Job.request_id == request.request_id)
                )
                if earlier is not None:
                    if earlier.request_digest != digest:
                        raise ConflictError(
                            f"request ID {request.request_id!r} was already used for a different submission"
                        )
                    return SubmitResult(
                        job=job_views(SessionReads(session), [earlier])[0], warnings=[], existing=True
                    )
            dataset, profiles, tasks, warnings, skipped = _validate(session, ctx, request)
            job = _create(session, ctx, request, digest, dataset, profiles, tasks, skipped)
            return SubmitResult(
                job=job_views(SessionReads(session), [job])[0], warnings=warnings, existing=False
            )
    except IntegrityError:
        if request.request_id is None:
            raise
        return submit_job(ctx, request)


def _create(
    session: Session,
    ctx: Context,
    request: JobRequest,
    digest: str,
    dataset: Dataset,
    profiles: list[Profile],
    tasks: list[str],
    skipped: list[SkippedTask],
) -> Job:
    job = Job(
        id=new_id("job"),
        project_id=ctx.project_id,
        dataset_id=dataset.id,
        runner=dataset.runner,
        attempts=request.attempts,
        status=JobStatus.PENDING,
        concurrency=request.concurrency,
        max_steps=request.max_steps,
        agent_timeout_sec=request.agent_timeout_sec,
        verifier_timeout_sec=request.verifier_timeout_sec,
        agent_setup_timeout_sec=request.agent_setup_timeout_sec,
        environment=request.environment,
        skip_unsupported=request.skip_unsupported,
        verifier_environment=request.verifier_environment,
        skipped=[item.model_dump() for item in skipped] or None,
        tasks=tasks,
        tags=request.tags,
        name=request.name,
        note=request.note,
        request_id=request.request_id,
        request_digest=digest,
    )
    session.add(job)
    session.add_all(JobProfile(job_id=job.id, position=i, profile_id=p.id) for i, p in enumerate(profiles))
    session.flush()
    members = {m.name: m for m in dataset_members(session, dataset.id)}
    attempts = range(1, request.attempts + 1)
    slots = (
        (profile.id, members[name], attempt) for profile in profiles for name in tasks for attempt in attempts
    )
    statement = _new_trials(job.id)
    while batch := list(islice(slots, _TRIAL_BATCH)):
        ids = new_ids("trl", len(batch))
        rows = [
            {
                "id": trial_id,
                "profile_id": profile_id,
                "task_name": member.name,
                "task_digest": member.digest,
                "member_position": member.position,
                "attempt": attempt,
            }
            for trial_id, (profile_id, member, attempt) in zip(ids, batch, strict=True)
        ]
        session.execute(statement, rows)
    return job


_TRIAL_BATCH = 5_000
"""Trials inserted per statement: a job of 100,000 trials never holds all their rows at once."""
_TRIALS = cast(Table, Trial.__table__)
"""The table itself: an insert of the mapped class would take the ORM's bulk path, row by row."""
_EMPTY_OBJECT = literal_column("'{}'", JSON)
_EMPTY_LIST = literal_column("'[]'", JSON)


def _new_trials(job_id: str) -> Insert:
    """The insert of a job's pending trials. What every new trial shares is part of the statement,
    written once, so each row carries only its own six values (no per-row JSON encoding or
    defaults, which cost more than the insert itself)."""
    return insert(_TRIALS).values(
        job_id=job_id,
        status=JobStatus.PENDING,
        dimensions=_EMPTY_OBJECT,
        warnings=_EMPTY_LIST,
        phases=_EMPTY_LIST,
        usage=_EMPTY_OBJECT,
        lease_token=0,
        structured_result=False,
        runs=0,
        invalidated=False,
        created_at=datetime.now(UTC),
    )
