"""Planning a comparison: tasks and attempts needed to detect an effect, from a baseline run.

The variances come from the baseline job's scored rewards (see `core.planning` for the model and
its assumptions); the dataset revision's size bounds what "more tasks" can mean in practice.
"""

import math

from envloop.core.planning import (
    ATTEMPT_OPTIONS,
    VarianceComponents,
    attempts_needed,
    detectable_effect,
    difference_variance,
    tasks_needed,
    variance_components,
)
from envloop.errors import UserError
from envloop.services.compare import Side
from envloop.services.context import Context
from envloop.services.datasets import dataset_members
from envloop.services.jobs import job_profiles, load_job
from envloop.services.leaderboard import pick_profile, run_key, run_summary
from envloop.services.results import job_result
from envloop.store.reads import SessionReads
from envloop.wire.planning import Plan, PlanOption

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = ["Plan", "PlanOption"]


def plan_comparison(
    ctx: Context,
    job_id: str,
    effect: float,
    profile: str | None = None,
    power: float = 0.8,
    alpha: float = 0.05,
    correlation: float = 0.0,
) -> Plan:
    _check(effect, power, alpha, correlation)
    with ctx.store.read() as session:
        job = load_job(session, ctx.project_id, job_id)
        chosen = pick_profile(job.id, job_profiles(SessionReads(session), job.id), profile, "the baseline")
        dataset_tasks = len(dataset_members(session, job.dataset_id))
        key = run_key(session, job)
    ref = f"{chosen.name}@{chosen.version}"
    result = job_result(ctx, job.id)
    metrics = result.profiles[ref]
    rewards = [[a for a in row.attempts if not isinstance(a, str)] for row in metrics.members]
    if sum(1 for r in rewards if r) < 2:
        raise UserError(f"job {job.id} ({ref}) has fewer than two tasks with a scored attempt to plan from")
    components = variance_components(rewards)
    if components.total == 0:
        raise UserError(
            f"every scored attempt of job {job.id} ({ref}) has the same reward: "
            "there is no variation to plan from"
        )
    options = []
    for k in sorted({*ATTEMPT_OPTIONS, job.attempts}):
        n = tasks_needed(difference_variance(components, k, correlation), effect, alpha, power)
        options.append(
            PlanOption(
                attempts=k,
                tasks=n,
                total_attempts=None if n is None else n * k,
                fits_dataset=n is not None and n <= dataset_tasks,
            )
        )
    summary = run_summary(key, job.id, result.status, chosen, metrics)
    return Plan(
        baseline=Side(**dict(summary), score_counts=metrics.score_counts),
        effect=effect,
        alpha=alpha,
        power=power,
        correlation=correlation,
        variance=components,
        options=options,
        dataset_tasks=dataset_tasks,
        attempts_with_all_tasks=(
            attempts_needed(components, dataset_tasks, effect, alpha, power, correlation)
            if dataset_tasks >= 2
            else None
        ),
        detectable_effect=detectable_effect(
            difference_variance(components, job.attempts, correlation), components.tasks, alpha, power
        ),
        notes=_notes(components, correlation),
    )


def _check(effect: float, power: float, alpha: float, correlation: float) -> None:
    if not (math.isfinite(effect) and effect > 0):
        raise UserError(f"effect must be a positive number in reward units (0.03 = 3 points), got {effect}")
    if not 0.5 <= power < 1:
        raise UserError(f"power must be at least 0.5 and below 1, got {power}")
    if not 0 < alpha < 1:
        raise UserError(f"alpha must lie between 0 and 1, got {alpha}")
    if not -1 <= correlation <= 1:
        raise UserError(f"correlation must lie between -1 and 1, got {correlation}")


def _notes(components: VarianceComponents, correlation: float) -> list[str]:
    notes = [
        "assumes the new run varies as the baseline did and the effect is the same on every task; "
        "an effect that varies by task needs more tasks"
    ]
    if correlation == 0:
        notes.append(
            "assumes no pairing benefit (correlation 0); the correlation `el job compare` reports "
            "for two similar runs can be passed to plan a paired comparison"
        )
    if components.within is None:
        notes.append(
            "the baseline has one attempt per task, so task and attempt variance cannot be told apart; "
            "the worse split is assumed for every attempt count"
        )
    return notes
