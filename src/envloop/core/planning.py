"""How many tasks and attempts a comparison needs, from the variance a baseline run showed.

A run's score varies for two reasons: tasks differ in difficulty (between-task variance σ²_b) and
attempts at one task differ (within-task variance σ²_w). Comparing a new run B with the baseline A
on the same n tasks with k attempts each, the per-task difference has variance

    V(k) = 2(1 - r)·σ²_b + 2·σ²_w / k

where r is the correlation of the two models' task scores (pairing on the same tasks removes the
shared difficulty; r = 0 is a comparison with no pairing benefit), assuming B varies as A does and
the effect is the same on every task. A two-sided paired t test at level alpha detects an effect δ
with the requested power when n ≥ (t(1-alpha/2, n-1) + t(power, n-1))² · V(k) / δ² (the power
analysis of Miller 2024, "Adding Error Bars to Evals", with t quantiles instead of normal ones so
that small n stays honest).
More attempts shrink only the within-task term: beyond some point only more tasks help.
"""

import math
from collections.abc import Callable, Sequence

from pydantic import ConfigDict, Field

from envloop.core.lazy import LazyModel
from envloop.core.stats import t_quantile

MAX_TASKS = 10**9
MAX_ATTEMPTS = 1000
ATTEMPT_OPTIONS = (1, 2, 3, 5, 10)


class VarianceComponents(LazyModel):
    """One-way random-effects decomposition of a run's rewards (method of moments)."""

    model_config = ConfigDict(frozen=True)

    tasks: int = Field(description="tasks with at least one scored attempt")
    attempts: float = Field(description="mean scored attempts per task")
    between: float = Field(description="σ²_b: variance of the tasks' true mean rewards")
    within: float | None = Field(
        description="σ²_w: variance of attempts at one task; null with one attempt each"
    )
    total: float = Field(description="variance of single rewards across the run")


def variance_components(rewards_by_task: Sequence[Sequence[float]]) -> VarianceComponents:
    """σ²_w pools the spread inside tasks with two or more attempts; σ²_b is the spread of task means
    less what within-task noise alone would put there (floored at 0). With one attempt per task the
    split is unknown; then `within` is null and `between` holds everything."""
    groups = [list(g) for g in rewards_by_task if len(g)]
    if len(groups) < 2:
        raise ValueError("variance components need at least two tasks with a scored attempt")
    means = [math.fsum(g) / len(g) for g in groups]
    grand = math.fsum(means) / len(means)
    spread_of_means = math.fsum((m - grand) ** 2 for m in means) / (len(means) - 1)
    dof = sum(len(g) - 1 for g in groups)
    values = [v for g in groups for v in g]
    overall = math.fsum(values) / len(values)
    total = math.fsum((v - overall) ** 2 for v in values) / max(1, len(values) - 1)
    if dof == 0:
        return VarianceComponents(
            tasks=len(groups), attempts=1.0, between=spread_of_means, within=None, total=total
        )
    within = math.fsum((v - m) ** 2 for g, m in zip(groups, means, strict=True) for v in g) / dof
    noise = math.fsum(within / len(g) for g in groups) / len(groups)
    return VarianceComponents(
        tasks=len(groups),
        attempts=len(values) / len(groups),
        between=max(0.0, spread_of_means - noise),
        within=within,
        total=total,
    )


def difference_variance(components: VarianceComponents, attempts: int, correlation: float) -> float:
    """V(k) of one task's B - A difference.

    With one attempt per task in the baseline the split between σ²_b and σ²_w is unknown; then the
    worst split is taken, max(2(1 - r)·s², 2·s²/k) with s² the variance of single rewards: the safe
    side, since it neither credits pairing for noise nor extra attempts for task difficulty.
    """
    if components.within is None:
        spread = components.between
        return max(2.0 * (1.0 - correlation) * spread, 2.0 * spread / attempts)
    return 2.0 * (1.0 - correlation) * components.between + 2.0 * components.within / attempts


def _factor(n: int, alpha: float, power: float) -> float:
    df = n - 1
    return (t_quantile(1.0 - alpha / 2.0, df) + t_quantile(power, df)) ** 2


def _smallest(low: int, high: int, holds: Callable[[int], bool]) -> int | None:
    """Smallest n in [low, high] where `holds` (false, then true as n grows) is true; None if never."""
    if not holds(high):
        return None
    if holds(low):
        return low
    while high - low > 1:
        middle = (low + high) // 2
        if holds(middle):
            high = middle
        else:
            low = middle
    return high


def tasks_needed(variance: float, effect: float, alpha: float, power: float) -> int | None:
    """Smallest n ≥ 2 with n ≥ factor(n)·V/δ² (a paired t test needs two tasks); None beyond a
    billion tasks. factor(n) falls as n grows, so the condition flips once and bisection finds it."""
    scale = variance / (effect * effect)
    return _smallest(2, MAX_TASKS, lambda n: n >= _factor(n, alpha, power) * scale)


def detectable_effect(variance: float, tasks: int, alpha: float, power: float) -> float:
    """The smallest effect `tasks` tasks detect with the requested power."""
    return math.sqrt(_factor(tasks, alpha, power) * variance / tasks)


def attempts_needed(
    components: VarianceComponents, tasks: int, effect: float, alpha: float, power: float, correlation: float
) -> int | None:
    """Attempts per task that let `tasks` tasks detect `effect`; None if no allowed count can."""
    budget = effect * effect * tasks / _factor(tasks, alpha, power)
    return _smallest(1, MAX_ATTEMPTS, lambda k: difference_variance(components, k, correlation) <= budget)
