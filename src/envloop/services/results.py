"""Job results: the store's trials mapped to metric slots, then the one metrics module."""

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from envloop.core.flags import count_flags
from envloop.core.metrics import AttemptSlot, ProfileMetrics, SlotState, compute_metrics
from envloop.core.oracle_check import ORACLE_AGENT, OracleCheck, check_oracle
from envloop.core.reward import reward_problem
from envloop.core.status import OPEN, TERMINAL, TrialStatus
from envloop.core.structured import Collected, summarize
from envloop.services.context import Context
from envloop.services.job_reads import job_profiles, job_row
from envloop.services.structured import collect_by_profile, counts
from envloop.store.reads import query
from envloop.wire.results import JobResult, ProfileResult

if TYPE_CHECKING:
    from envloop.services.job_reads import ProfileRow
    from envloop.store.reads import Statement

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = ["JobResult", "ProfileResult"]


def slot_state(status: str, reward: float | None, invalidated: bool) -> SlotState:
    """A missing reward is never a zero: every non-scored slot keeps the reason it has none."""
    if invalidated:
        return "invalidated"
    if reward is not None and countable(reward):
        return "scored"
    if status in OPEN:
        return "waiting"
    if status == TrialStatus.CANCELLED:
        return "cancelled"
    return "invalid"


def countable(reward: float) -> bool:
    """A stored reward the metrics may count: finite and within the accepted range. Rewards are
    checked when a verifier writes them; a store written before that check (a `1e308` that would
    overflow every sum) must still give the rest of the job its metrics, so such a trial counts
    as terminal without a reward."""
    return reward_problem(reward) is None


@query
def attempts_of_job() -> "Statement":
    from sqlalchemy import bindparam, select  # noqa: PLC0415 - only when compiled (store.reads)

    from envloop.store.tables import Trial  # noqa: PLC0415

    return select(
        Trial.id,
        Trial.profile_id,
        Trial.task_name,
        Trial.attempt,
        Trial.status,
        Trial.reward,
        Trial.invalidated,
        Trial.structured_result,
        Trial.flags,
    ).where(Trial.job_id == bindparam("job_id"))


def job_result(ctx: Context, job_id: str) -> JobResult:
    return job_result_detail(ctx, job_id)[0]


_Detail = tuple[JobResult, dict[str, Collected]]
_CACHE_SIZE = 8
_cache: OrderedDict[tuple[str, str, int], _Detail] = OrderedDict()
_cache_lock = threading.Lock()


def _cached(key: tuple[str, str, int]) -> _Detail | None:
    with _cache_lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
        return found


def _remember(key: tuple[str, str, int], detail: _Detail) -> None:
    with _cache_lock:
        _cache[key] = detail
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


def job_result_detail(ctx: Context, job_id: str) -> _Detail:
    """The result, and per profile reference the structured values behind its aggregates (which a
    comparison of two runs pairs task by task).

    A finished job's result only changes when one of its trials is invalidated or restored, which
    bumps the job's `result_version`; until then a server answers it from memory (a console polling a
    job of 100,000 trials would otherwise rebuild it on every request). Callers must not modify it.
    """
    with ctx.reads() as reads:
        job = job_row(reads, ctx.project_id, job_id)
        key = (ctx.url, job.id, job.result_version)
        finished = job.status in TERMINAL
        if finished and (found := _cached(key)) is not None:
            return found
        profiles = job_profiles(reads, job.id)
        rows = reads.rows(attempts_of_job, job_id=job.id)
    slots: dict[str, list[AttemptSlot]] = {p.id: [] for p in profiles}
    flags: dict[str, list[list[Any]]] = {p.id: [] for p in profiles}
    counted: list[tuple[str, str, str]] = []
    for trial_id, profile_id, task, attempt, status, reward, invalidated, declared, kept_flags in rows:
        flags[profile_id].append(kept_flags or [])
        state = slot_state(status, reward, invalidated)
        kept = reward if state in ("scored", "invalidated") else None
        slots[profile_id].append(AttemptSlot(task, attempt, state, kept))
        if declared and counts(status, invalidated):
            counted.append((trial_id, profile_id, task))
    by_id = collect_by_profile(ctx, counted)
    structured = {f"{p.name}@{p.version}": by_id.get(p.id, Collected()) for p in profiles}
    metrics = {p.id: compute_metrics(list(job.tasks), job.attempts, slots[p.id]) for p in profiles}
    result = JobResult(
        id=job.id,
        status=job.status,
        attempts=job.attempts,
        verifier_environment=job.verifier_environment,
        profiles={
            ref: ProfileResult.model_construct(
                **dict(metrics[p.id]),
                structured=summarize(structured[ref]),
                flags=count_flags(flags[p.id]),
                oracle=_oracle(p, metrics[p.id]),
            )
            for p, ref in zip(profiles, structured, strict=True)
        },
        flags=count_flags(f for listed in flags.values() for f in listed),
    )
    if finished:
        _remember(key, (result, structured))
    return result, structured


def _oracle(profile: "ProfileRow", metrics: ProfileMetrics) -> OracleCheck | None:
    return check_oracle(metrics.members) if profile.params.get("AGENT_NAME") == ORACLE_AGENT else None
