"""The task grid: tasks x profiles, each cell the k attempts of that pair with their trial, reward
and mark, and per task how weak and how inconsistent it is.

Per-task means come from the job result (the one metrics module); each attempt's mark comes from its
trial's execution status and from `slot_state`, the rule that decides whether a reward counts. Two
spreads say how inconsistent a task is: across the attempts of one profile (the largest
max - min of scored rewards over the profiles) and across profiles (max - min of the profiles'
per-task means). Sorting puts the weakest or the most inconsistent tasks first.
"""

from typing import Literal

from pydantic import BaseModel, Field
from sqlalchemy import select

from envloop.core.metrics import MissingState
from envloop.core.status import TrialStatus
from envloop.services.context import Context
from envloop.services.job_reads import ProfileRow
from envloop.services.jobs import job_profiles, load_job
from envloop.services.results import JobResult, job_result, slot_state
from envloop.store.reads import SessionReads
from envloop.store.tables import Job, Trial

GridSort = Literal["task", "score", "attempt_spread", "profile_spread"]
GRID_SORTS: tuple[GridSort, ...] = ("task", "score", "attempt_spread", "profile_spread")
Mark = Literal["scored", "failed", "no_reward", "cancelled", "invalidated", "pending", "running"]


class GridAttempt(BaseModel):
    attempt: int
    trial_id: str | None = Field(description="None for a slot with no trial")
    mark: Mark
    reward: float | None = Field(description="the trial's reward (kept for display when invalidated)")
    counted: bool = Field(description="whether the reward counts in the metrics")
    state: float | MissingState = Field(description="as the job result's member row has it")
    error_type: str | None = None


class GridCell(BaseModel):
    profile: str
    attempts: list[GridAttempt]
    mean: float | None
    scored: int
    spread: float | None = Field(description="max - min of the scored rewards; None below two")


class GridRow(BaseModel):
    task: str
    cells: list[GridCell]
    score: float | None = Field(description="mean of the profiles' per-task means (sorting only)")
    attempt_spread: float | None
    profile_spread: float | None


class TaskGrid(BaseModel):
    job_id: str
    attempts: int
    profiles: list[str]
    total_tasks: int
    sort: GridSort
    offset: int
    rows: list[GridRow]


def _mark(status: TrialStatus, reward: float | None, invalidated: bool) -> Mark:
    if invalidated:
        return "invalidated"
    if status in (TrialStatus.PENDING, TrialStatus.RUNNING, TrialStatus.CANCELLED):
        return status.value  # type: ignore[return-value]
    if status == TrialStatus.FAILED and reward is None:
        return "failed"
    return "scored" if reward is not None else "no_reward"


def _spread(values: list[float]) -> float | None:
    return max(values) - min(values) if len(values) >= 2 else None


def _summary(means: list[float | None], spreads: list[float | None]) -> tuple[float | None, ...]:
    """(score, attempt spread, profile spread) of one task from its cells' means and spreads."""
    scored = [m for m in means if m is not None]
    spread = [s for s in spreads if s is not None]
    return (
        sum(scored) / len(scored) if scored else None,
        max(spread) if spread else None,
        _spread(scored),
    )


def _sort_key(sort: GridSort, summary: tuple[float | None, ...]) -> tuple[bool, float]:
    value = summary[GRID_SORTS.index(sort) - 1]
    if sort == "score":
        return value is None, value if value is not None else 0.0
    return value is None, -(value or 0.0)


def task_grid(
    ctx: Context, job_id: str, sort: GridSort = "task", offset: int = 0, limit: int | None = None
) -> TaskGrid:
    """Rows in dataset order, or sorted: weakest first (`score`), or most inconsistent first.

    Tasks are ordered on the job result's member rows alone; only the page's tasks are then read
    with their trials, so a page of a 10,000-trial job costs a page, not the job.
    """
    result = job_result(ctx, job_id)
    with ctx.store.read() as session:
        job = load_job(session, ctx.project_id, job_id)
        profiles = job_profiles(SessionReads(session), job.id)
    tasks = list(job.tasks)
    refs = [f"{p.name}@{p.version}" for p in profiles]
    members = [result.profiles[ref].members for ref in refs]
    summaries = []
    for position in range(len(tasks)):
        rows_of_task = [m[position] for m in members]
        scored = [[a for a in row.attempts if not isinstance(a, str)] for row in rows_of_task]
        summaries.append(_summary([row.mean for row in rows_of_task], [_spread(r) for r in scored]))
    order = list(range(len(tasks)))
    if sort != "task":
        order.sort(key=lambda position: _sort_key(sort, summaries[position]))
    end = None if limit is None else offset + limit
    page = order[offset:end]
    cells = _cells(ctx, job, profiles, result, [tasks[position] for position in page])
    grid_rows = []
    for position in page:
        task = tasks[position]
        score, attempt_spread, profile_spread = summaries[position]
        grid_rows.append(
            GridRow(
                task=task,
                cells=[cells[task, ref] for ref in refs],
                score=score,
                attempt_spread=attempt_spread,
                profile_spread=profile_spread,
            )
        )
    return TaskGrid(
        job_id=job.id,
        attempts=job.attempts,
        profiles=refs,
        total_tasks=len(tasks),
        sort=sort,
        offset=offset,
        rows=grid_rows,
    )


def task_cells(ctx: Context, job_id: str, tasks: list[str]) -> dict[tuple[str, str], GridCell]:
    """The cells of some of the job's tasks, by (task, profile reference): each task's attempts with
    their trials and marks (a comparison shows the tasks of its page this way)."""
    result = job_result(ctx, job_id)
    with ctx.store.read() as session:
        job = load_job(session, ctx.project_id, job_id)
        profiles = job_profiles(SessionReads(session), job.id)
    return _cells(ctx, job, profiles, result, [t for t in tasks if t in set(job.tasks)])


def _cells(
    ctx: Context, job: Job, profiles: list[ProfileRow], result: JobResult, tasks: list[str]
) -> dict[tuple[str, str], GridCell]:
    with ctx.store.read() as session:
        trial_rows = (
            session.connection()
            .execute(
                select(
                    Trial.id,
                    Trial.profile_id,
                    Trial.task_name,
                    Trial.attempt,
                    Trial.status,
                    Trial.reward,
                    Trial.invalidated,
                    Trial.error_type,
                ).where(Trial.job_id == job.id, Trial.task_name.in_(tasks))
            )
            .all()
        )
    ref_of = {p.id: f"{p.name}@{p.version}" for p in profiles}
    trials = {(ref_of[r.profile_id], r.task_name, r.attempt): r for r in trial_rows}
    position_of = {task: position for position, task in enumerate(job.tasks)}
    cells = {}
    for task in tasks:
        for ref in ref_of.values():
            member = result.profiles[ref].members[position_of[task]]
            attempts = []
            for attempt, state in enumerate(member.attempts, start=1):
                row = trials.get((ref, task, attempt))
                if row is None:
                    attempts.append(
                        GridAttempt(
                            attempt=attempt,
                            trial_id=None,
                            mark="cancelled",
                            reward=None,
                            counted=False,
                            state=state,
                        )
                    )
                    continue
                attempts.append(
                    GridAttempt(
                        attempt=attempt,
                        trial_id=row.id,
                        mark=_mark(row.status, row.reward, row.invalidated),
                        reward=row.reward,
                        counted=slot_state(row.status, row.reward, row.invalidated) == "scored",
                        state=state,
                        error_type=row.error_type,
                    )
                )
            rewards = [a for a in member.attempts if not isinstance(a, str)]
            cells[task, ref] = GridCell(
                profile=ref,
                attempts=attempts,
                mean=member.mean,
                scored=member.scored,
                spread=_spread(rewards),
            )
    return cells
