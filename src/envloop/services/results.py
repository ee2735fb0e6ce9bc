"""Job results: the store's trials mapped to metric slots, then the one metrics module."""

from pydantic import BaseModel
from sqlalchemy import select

from envloop.core.metrics import AttemptSlot, ProfileMetrics, SlotState, compute_metrics
from envloop.core.structured import Collected, StructuredSummary, summarize
from envloop.services.context import Context
from envloop.services.jobs import job_profiles, load_job
from envloop.services.structured import collect_by_profile, counts
from envloop.store.tables import Trial


class ProfileResult(ProfileMetrics):
    """A profile's metrics with the aggregate of its trials' declared structured results."""

    structured: StructuredSummary


class JobResult(BaseModel):
    id: str
    status: str
    attempts: int
    profiles: dict[str, ProfileResult]


def slot_state(status: str, reward: float | None, invalidated: bool, dispatched: bool) -> SlotState:
    """A missing reward is never a zero: every non-scored slot keeps the reason it has none."""
    if invalidated:
        return "invalidated"
    if reward is not None:
        return "scored"
    if status in ("pending", "running"):
        return "waiting"
    if status == "cancelled" and not dispatched:
        return "undispatched"
    return "invalid"


def job_result(ctx: Context, job_id: str) -> JobResult:
    return job_result_detail(ctx, job_id)[0]


def job_result_detail(ctx: Context, job_id: str) -> tuple[JobResult, dict[str, Collected]]:
    """The result, and per profile reference the structured values behind its aggregates (which a
    comparison of two runs pairs task by task)."""
    with ctx.store.read() as session:
        job = load_job(session, ctx.project_id, job_id)
        profiles = job_profiles(session, job.id)
        # Plain tuples from the connection: a big job has a row per attempt, and the ORM's per-row
        # bookkeeping (or parsing a start time only tested for presence) would cost more than the rest.
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
                    Trial.started_at.is_not(None),
                    Trial.structured_result,
                ).where(Trial.job_id == job.id)
            )
            .all()
        )
    slots: dict[str, list[AttemptSlot]] = {p.id: [] for p in profiles}
    counted: list[tuple[str, str, str]] = []
    for trial_id, profile_id, task, attempt, status, reward, invalidated, dispatched, declared in rows:
        state = slot_state(status, reward, invalidated, dispatched)
        slots[profile_id].append(AttemptSlot(task, attempt, state, reward))
        if declared and counts(status, invalidated):
            counted.append((trial_id, profile_id, task))
    by_id = collect_by_profile(ctx, counted)
    structured = {f"{p.name}@{p.version}": by_id.get(p.id, Collected()) for p in profiles}
    result = JobResult(
        id=job.id,
        status=job.status,
        attempts=job.attempts,
        profiles={
            ref: ProfileResult.model_construct(
                **dict(compute_metrics(list(job.tasks), job.attempts, slots[p.id])),
                structured=summarize(structured[ref]),
            )
            for p, ref in zip(profiles, structured, strict=True)
        },
    )
    return result, structured
