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
from envloop.services.context import Context
from envloop.services.jobs import job_profiles, load_job
from envloop.services.results import job_result, slot_state
from envloop.store.tables import Trial

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


def _mark(status: str, reward: float | None, invalidated: bool) -> Mark:
    if invalidated:
        return "invalidated"
    if status in ("pending", "running", "cancelled"):
        return status  # type: ignore[return-value]
    if status == "failed" and reward is None:
        return "failed"
    return "scored" if reward is not None else "no_reward"


def _spread(values: list[float]) -> float | None:
    return max(values) - min(values) if len(values) >= 2 else None


def task_grid(
    ctx: Context, job_id: str, sort: GridSort = "task", offset: int = 0, limit: int | None = None
) -> TaskGrid:
    """Rows in dataset order, or sorted: weakest first (`score`), or most inconsistent first."""
    result = job_result(ctx, job_id)
    with ctx.store.read() as session:
        job = load_job(session, ctx.project_id, job_id)
        profiles = job_profiles(session, job.id)
        rows = (
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
                    Trial.started_at.is_not(None),
                ).where(Trial.job_id == job.id)
            )
            .all()
        )
        tasks = list(job.tasks)
    refs = {p.id: f"{p.name}@{p.version}" for p in profiles}
    trials = {(refs[r.profile_id], r.task_name, r.attempt): r for r in rows}
    grid_rows = []
    for position, task in enumerate(tasks):
        cells = []
        for ref in refs.values():
            member = result.profiles[ref].members[position]
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
                counted = slot_state(row.status, row.reward, row.invalidated, row[8]) == "scored"
                attempts.append(
                    GridAttempt(
                        attempt=attempt,
                        trial_id=row.id,
                        mark=_mark(row.status, row.reward, row.invalidated),
                        reward=row.reward,
                        counted=counted,
                        state=state,
                        error_type=row.error_type,
                    )
                )
            rewards = [a for a in member.attempts if not isinstance(a, str)]
            cells.append(
                GridCell(
                    profile=ref,
                    attempts=attempts,
                    mean=member.mean,
                    scored=member.scored,
                    spread=_spread(rewards),
                )
            )
        means = [c.mean for c in cells if c.mean is not None]
        spreads = [c.spread for c in cells if c.spread is not None]
        grid_rows.append(
            GridRow(
                task=task,
                cells=cells,
                score=sum(means) / len(means) if means else None,
                attempt_spread=max(spreads) if spreads else None,
                profile_spread=_spread(means),
            )
        )
    if sort == "score":
        grid_rows.sort(key=lambda r: (r.score is None, r.score if r.score is not None else 0.0))
    elif sort in ("attempt_spread", "profile_spread"):
        grid_rows.sort(key=lambda r: (getattr(r, sort) is None, -(getattr(r, sort) or 0.0)))
    end = None if limit is None else offset + limit
    return TaskGrid(
        job_id=job.id,
        attempts=job.attempts,
        profiles=list(refs.values()),
        total_tasks=len(tasks),
        sort=sort,
        offset=offset,
        rows=grid_rows[offset:end],
    )
