"""A job's samples: one row per attempt with its input (the prompt, or the start of the
instruction), its target where the task has one, its output (the final answer or the agent's last
message), reward, status, tokens and duration, filtered, searched, sorted and paged by the store.

What the rows show beyond the trials table is kept in the store the first time the list is read:
the tasks' facts (`services.task_facts`) and, for each finished trial, its answer, read once from
its kept trajectory (or the agent's own output when it kept none), with its tokens and duration
(`store.tables.TrialSample`). Reading a page is then one query, however large the job.
"""

from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Select, Table, and_, func, or_, select

from envloop.core.status import TERMINAL
from envloop.core.trajectory import TRAJECTORY_FILE, ModelStep, ScoreStep, ToolStep
from envloop.errors import UserError
from envloop.services.context import Context
from envloop.services.jobs import job_profiles, load_job
from envloop.services.results import countable
from envloop.services.task_facts import record_task_facts
from envloop.services.trial_files import surely_published
from envloop.store.artifacts import ArtifactNotFoundError
from envloop.store.reads import SessionReads
from envloop.store.tables import Job, JobProfile, Profile, TaskFacts, Trial, TrialSample
from envloop.trajectories.files import read_trajectory
from envloop.wire.samples import EXCERPT_CHARS, INVALIDATED, Sample, SamplePage, SampleQuery

Rows = Select[*tuple[Any, ...]]
"""A query of sample rows (its columns are listed once, in `_filtered`)."""

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = ["Sample", "SamplePage", "SampleQuery"]

_TABLE: Table = TrialSample.__table__  # type: ignore[assignment]


def job_samples(ctx: Context, job_id: str, query: SampleQuery) -> SamplePage:
    with ctx.store.read() as session:
        job = load_job(session, ctx.project_id, job_id)
        refs = {f"{p.name}@{p.version}": p.id for p in job_profiles(SessionReads(session), job.id)}
    if query.profile is not None and query.profile not in refs:
        raise UserError(f"job {job.id} did not run profile {query.profile} (it ran {', '.join(refs)})")
    record_task_facts(ctx, job)
    record_finished(ctx, job)
    statement = _filtered(job.id, query, refs)
    with ctx.store.read() as session:
        rows = session.execute(_sorted(statement, query).limit(query.limit).offset(query.offset)).all()
        if rows:
            total = rows[0].total
        else:  # past the last page: the count alone
            total = session.scalar(select(func.count()).select_from(statement.subquery())) or 0
    return SamplePage(job_id=job.id, total=total, offset=query.offset, samples=[_sample(r) for r in rows])


def _filtered(job_id: str, query: SampleQuery, refs: dict[str, str]) -> Rows:
    statement: Rows = (
        select(
            Trial.id,
            Trial.task_name,
            Profile.name,
            Profile.version,
            Trial.attempt,
            Trial.status,
            Trial.error_type,
            Trial.error_message,
            Trial.invalidated,
            Trial.reward,
            Trial.reward_note,
            Trial.usage,
            Trial.started_at,
            Trial.finished_at,
            TaskFacts.input,
            TaskFacts.target,
            TrialSample.output,
            JobProfile.position,
            Trial.member_position,
            func.count().over().label("total"),  # every matching row, counted with the page
        )
        .join(Profile, Profile.id == Trial.profile_id)
        .join(JobProfile, and_(JobProfile.job_id == Trial.job_id, JobProfile.profile_id == Trial.profile_id))
        .outerjoin(TaskFacts, TaskFacts.digest == Trial.task_digest)
        .outerjoin(TrialSample, TrialSample.trial_id == Trial.id)
        .where(Trial.job_id == job_id)
    )
    if query.status == INVALIDATED:
        statement = statement.where(Trial.invalidated.is_(True))
    elif query.status is not None:
        statement = statement.where(Trial.status == query.status)
    if query.profile is not None:
        statement = statement.where(Trial.profile_id == refs[query.profile])
    counted = and_(Trial.reward.is_not(None), Trial.invalidated.is_(False))
    if query.reward == "counted" or query.min_reward is not None or query.max_reward is not None:
        statement = statement.where(counted)
    elif query.reward == "none":
        statement = statement.where(or_(Trial.reward.is_(None), Trial.invalidated.is_(True)))
    if query.min_reward is not None:
        statement = statement.where(Trial.reward >= query.min_reward)
    if query.max_reward is not None:
        statement = statement.where(Trial.reward <= query.max_reward)
    if query.q:
        text = query.q.strip()
        columns: list[Any] = [
            Trial.task_name,
            TaskFacts.input,
            TaskFacts.target,
            TrialSample.output,
            Trial.error_message,
            Trial.reward_note,
        ]
        statement = statement.where(or_(*(column.icontains(text, autoescape=True) for column in columns)))
    return statement


def _sorted(statement: Rows, query: SampleQuery) -> Rows:
    grid: list[Any] = [JobProfile.position, Trial.member_position, Trial.attempt]
    if query.sort == "attempt":
        return statement.order_by(*grid)
    column: Any = {
        "reward": Trial.reward,
        "duration": TrialSample.duration_sec,
        "tokens": TrialSample.tokens,
    }[query.sort.lstrip("-")]
    direction = column.desc() if query.sort.startswith("-") else column.asc()
    return statement.order_by(column.is_(None), direction, *grid)


def _sample(row: Any) -> Sample:
    usage = dict(row.usage or {})
    note = row.error_message or row.reward_note
    return Sample(
        trial_id=row.id,
        task=row.task_name,
        profile=f"{row.name}@{row.version}",
        attempt=row.attempt,
        status=row.status,
        error_type=row.error_type,
        invalidated=row.invalidated,
        reward=row.reward,
        counted=row.reward is not None and not row.invalidated and countable(row.reward),
        note=note.strip().splitlines()[0] if note and note.strip() else None,
        input=row.input,
        target=row.target,
        output=row.output,
        input_tokens=usage.get("input_tokens"),
        output_tokens=usage.get("output_tokens"),
        duration_sec=_seconds(row.started_at, row.finished_at),
    )


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else (end - start).total_seconds()


def record_finished(ctx: Context, job: Job) -> None:
    """Keep the answer, tokens and duration of each finished trial the store has none for yet."""
    with ctx.store.read() as session:
        rows = session.execute(
            select(Trial.id, Trial.usage, Trial.started_at, Trial.finished_at)
            .outerjoin(TrialSample, TrialSample.trial_id == Trial.id)
            .where(Trial.job_id == job.id, Trial.status.in_(TERMINAL), TrialSample.trial_id.is_(None))
        ).all()
    found = []
    for row in rows:
        output = _output(ctx, row.id)
        if output is None and not surely_published(row.finished_at):
            continue  # its files may still come: read it again next time rather than keep it empty
        usage = dict(row.usage or {})
        found.append(
            {
                "trial_id": row.id,
                "job_id": job.id,
                "output": output,
                "tokens": int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
                if usage
                else None,
                "duration_sec": _seconds(row.started_at, row.finished_at),
            }
        )
    ctx.store.insert_new(_TABLE, found)


def _output(ctx: Context, trial_id: str) -> str | None:
    """The trial's answer: a chat trial's scored answer, else the agent's `finish` summary or last
    message, else the end of the agent's own output; None when it kept none of these."""
    try:
        trajectory = read_trajectory(ctx.artifacts.trial_file(trial_id, TRAJECTORY_FILE))
    except (ArtifactNotFoundError, ValidationError, OSError):
        trajectory = None
    if trajectory is not None:
        for step in reversed(trajectory.steps):
            if isinstance(step, ScoreStep):
                return step.answer[:EXCERPT_CHARS]
            if isinstance(step, ToolStep) and step.tool == "finish" and step.stdout.strip():
                return step.stdout[:EXCERPT_CHARS]
            if isinstance(step, ModelStep) and step.text.strip():
                return step.text[:EXCERPT_CHARS]
    try:
        with ctx.artifacts.trial_file(trial_id, "agent/stdout.txt").open("rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - EXCERPT_CHARS))
            tail = handle.read().decode("utf-8", errors="replace")
    except (ArtifactNotFoundError, OSError):
        return None
    return tail.strip() or None
