"""Job metrics per Profile (SPEC section 3), computed in one place for every surface.

The input is the grid of requested attempt slots (members x k), each in one state. Only a
"scored" slot carries a counted reward; every other state is a missing measurement and is never
read as 0. Coverage (`score_counts`) travels with every aggregate so a high score on a partial run
cannot pass for a result on the whole dataset.
"""

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from pydantic import ConfigDict, Field

from envloop.core.lazy import LazyModel
from envloop.core.stats import (
    PairedDifference,
    clustered_stderr,
    curve_sums,
    paired_difference,
    proportion_interval,
    t_interval,
)

SlotState = Literal["scored", "waiting", "invalid", "cancelled", "invalidated", "undispatched"]
MissingState = Literal["waiting", "invalid", "cancelled", "invalidated", "undispatched"]


@dataclass(frozen=True, slots=True)
class AttemptSlot:
    """One requested attempt of one task.

    scored: a counted numeric reward (a failed trial can still be scored); waiting: pending or
    running; invalid: finished (completed or failed) without a reward; cancelled: stopped by a
    cancellation before it had a reward; invalidated: excluded by a user (the excluded reward may
    be kept for display but never counts); undispatched: no trial was ever made for it. A plain
    dataclass, checked where the grid is read (attempt in 1..k, a finite reward only where the
    state allows one): a job of a million attempts builds a million of these per result.
    """

    task: str
    attempt: int
    """1-based."""
    state: SlotState
    reward: float | None = None


class ScoreCounts(LazyModel):
    model_config = ConfigDict(frozen=True)

    total: int = Field(description="members x k, including undispatched slots")
    scored: int = Field(description="attempts with a counted reward")
    missing: int = Field(description="requested attempts without a counted reward")
    invalid: int = Field(description="attempts that finished without a reward (part of missing)")
    cancelled: int = Field(
        default=0, description="attempts cancelled before they had a reward (part of missing)"
    )
    invalidated: int = Field(description="attempts excluded by a user (part of missing)")
    total_members: int
    complete_members: int = Field(description="members with all k attempts scored")


class CurvePoint(LazyModel):
    model_config = ConfigDict(frozen=True)

    k: int
    pass_at_k: float
    pass_hat_k: float
    tasks: int = Field(description="tasks with at least k scored attempts, each weighted equally")


class MemberRow(LazyModel):
    """One selected task: its k slots in attempt order, as rewards or the reason one is missing."""

    model_config = ConfigDict(frozen=True)

    task: str
    attempts: list[float | MissingState]
    scored: int
    mean: float | None
    passes: int | None = Field(description="rewards equal to 1; null when none scored or any is not 0/1")
    complete: bool


class ProfileMetrics(LazyModel):
    model_config = ConfigDict(
        frozen=True, validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )

    k: int
    score: float | None
    pass_: float | None = Field(alias="pass")
    pass_at_k: float | None
    pass_hat_k: float | None
    score_counts: ScoreCounts
    curve: list[CurvePoint] | None
    stderr: float | None = Field(description="standard error of score, clustered by task")
    ci95: tuple[float, float] | None
    members: list[MemberRow]


def compute_metrics(members: Sequence[str], k: int, slots: Iterable[AttemptSlot]) -> ProfileMetrics:
    """Aggregate the slots of one Profile in one job.

    `members` are the selected task names in dataset order and `k` the requested attempts per task.
    A (member, attempt) pair absent from `slots` is undispatched. A slot naming an unknown task, an
    attempt beyond k, or a pair already seen is a caller's bug and raises ValueError.
    """
    grid = _grid(members, k, slots)
    rows = [_member_row(task, k, line) for task, line in zip(members, grid, strict=True)]
    rewards_by_task = [[r for r in row.attempts if not isinstance(r, str)] for row in rows]
    all_rewards = [r for rewards in rewards_by_task for r in rewards]
    scored = len(all_rewards)
    binary = scored > 0 and all(row.passes is not None for row in rows if row.scored)

    score = math.fsum(all_rewards) / scored if scored else None
    complete = [rewards for rewards, row in zip(rewards_by_task, rows, strict=True) if row.complete]
    pass_at_k = pass_hat_k = None
    if binary and complete:
        pass_at_k = sum(1.0 in rewards for rewards in complete) / len(complete)
        pass_hat_k = sum(all(r == 1.0 for r in rewards) for rewards in complete) / len(complete)

    stderr = clustered_stderr(rewards_by_task)
    ci95 = None
    if score is not None and stderr is not None:
        clusters = sum(1 for rewards in rewards_by_task if rewards)
        ci95 = score_interval(score, stderr, clusters, scored, all_rewards, binary=binary)

    states = [slot for row in rows for slot in row.attempts if isinstance(slot, str)]
    counts = ScoreCounts(
        total=len(members) * k,
        scored=scored,
        missing=len(states),
        invalid=states.count("invalid"),
        cancelled=states.count("cancelled"),
        invalidated=states.count("invalidated"),
        total_members=len(members),
        complete_members=len(complete),
    )
    return ProfileMetrics(
        k=k,
        score=score,
        pass_=score if binary else None,
        pass_at_k=pass_at_k,
        pass_hat_k=pass_hat_k,
        score_counts=counts,
        curve=_curve(rewards_by_task) if binary else None,
        stderr=stderr,
        ci95=ci95,
        members=rows,
    )


def score_bounds(reward_sum: float, total: int, missing: int, best: float) -> tuple[float, float]:
    """(lower, upper): the mean over `total` requested attempts with each of the `missing` ones
    counted as 0, and as `best` (the highest reward the row could have had: max(1, its highest))."""
    if total <= 0:
        return 0.0, max(best, 1.0)
    ceiling = max(best, 1.0)
    return reward_sum / total, (reward_sum + missing * ceiling) / total


def bounds_of(m: ProfileMetrics) -> tuple[float, float]:
    """`score_bounds` of a profile's metrics: its scored rewards, its missing attempts."""
    rewards = [value for row in m.members for value in row.attempts if not isinstance(value, str)]
    counts = m.score_counts
    return score_bounds(math.fsum(rewards), counts.total, counts.missing, max(rewards, default=1.0))


def score_interval(
    score: float, stderr: float, clusters: int, values: int, rewards: Iterable[float], *, binary: bool
) -> tuple[float, float]:
    """The 95% interval of a mean reward over `clusters` tasks: Student t on clusters - 1 df.

    Rewards that all lie in [0, 1] (pass rates, partial credit) cannot average outside it, so the
    interval is clamped there. A pass rate (binary rewards) also gets the cluster-aware Wilson
    interval, and the result is the hull of both: the t interval alone collapses to a point when
    every attempt agrees (0% or 100%: no spread), and a pass rate of 100% on five tasks is not
    certain; the Wilson interval alone is narrower than t for a handful of tasks near 50%.
    """
    bounded = binary or all(0.0 <= r <= 1.0 for r in rewards)
    low, high = t_interval(score, stderr, clusters - 1, clamp=(0.0, 1.0) if bounded else None)
    if binary:
        wilson_low, wilson_high = proportion_interval(score, stderr, clusters, values)
        low, high = min(low, wilson_low), max(high, wilson_high)
    return low, high


class TaskDifference(LazyModel):
    model_config = ConfigDict(frozen=True)

    task: str
    a: float
    b: float
    difference: float = Field(description="b - a")


class PairedTasks(LazyModel):
    """Two runs compared task by task: B - A over the tasks both measured, and the tasks left out."""

    model_config = ConfigDict(frozen=True)

    difference: PairedDifference = Field(description="mean of b - a per task, with its uncertainty")
    tasks: list[TaskDifference]
    only_a: list[str] = Field(description="tasks only A measured (left out, never zeroed)")
    only_b: list[str] = Field(description="tasks only B measured (left out, never zeroed)")


def paired_tasks(a: Mapping[str, float], b: Mapping[str, float], *, rates: bool = False) -> PairedTasks:
    """Pair per-task values by task name, in A's order; a task measured on one side only is left out.

    `rates` says the values lie in [0, 1], which keeps the interval of their difference within
    [-1, 1] (see `paired_difference`).
    """
    pairs = [TaskDifference(task=t, a=x, b=b[t], difference=b[t] - x) for t, x in a.items() if t in b]
    return PairedTasks(
        difference=paired_difference([p.b for p in pairs], [p.a for p in pairs], rates=rates),
        tasks=pairs,
        only_a=[t for t in a if t not in b],
        only_b=[t for t in b if t not in a],
    )


def task_means(m: ProfileMetrics) -> dict[str, float]:
    """Mean reward of every task with a scored attempt, in member order."""
    return {row.task: row.mean for row in m.members if row.mean is not None}


def rewards_are_rates(m: ProfileMetrics) -> bool:
    """Every scored reward lies in [0, 1], so every mean of them does too."""
    return all(
        0.0 <= value <= 1.0 for row in m.members for value in row.attempts if not isinstance(value, str)
    )


def compare_metrics(a: ProfileMetrics, b: ProfileMetrics) -> PairedTasks:
    """B - A task by task over tasks both sides scored; a task missing a score on either side is
    left out, never zeroed. When both sides' rewards are rates the interval stays within [-1, 1]."""
    return paired_tasks(task_means(a), task_means(b), rates=rewards_are_rates(a) and rewards_are_rates(b))


def compare_profiles(a: ProfileMetrics, b: ProfileMetrics) -> PairedDifference:
    """Paired comparison a - b of per-task mean rewards, over tasks both sides scored.

    Tasks are matched by name, so two jobs on the same dataset revision compare task by task even
    when their selections differ; a task missing a score on either side is left out, not zeroed.
    """
    return compare_metrics(b, a).difference


def null_reasons(m: ProfileMetrics) -> dict[str, str]:
    """Why each null aggregate is null, in words a user can act on (a null is never a silent 0)."""
    reasons: dict[str, str] = {}
    if m.score is None:
        return dict.fromkeys(
            ("score", "pass", "pass_at_k", "pass_hat_k", "curve", "stderr"), "no attempt has a counted reward"
        )
    if m.pass_ is None:
        not_binary = "some scored rewards are not 0 or 1"
        reasons.update(dict.fromkeys(("pass", "pass_at_k", "pass_hat_k", "curve"), not_binary))
    elif m.pass_at_k is None:
        no_member = f"no member has all {m.k} attempts scored"
        reasons.update(dict.fromkeys(("pass_at_k", "pass_hat_k"), no_member))
    if m.stderr is None:
        reasons["stderr"] = "fewer than two tasks have a scored attempt"
    return reasons


def _grid(members: Sequence[str], k: int, slots: Iterable[AttemptSlot]) -> list[list[AttemptSlot | None]]:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    index = {task: position for position, task in enumerate(members)}
    if len(index) != len(members):
        raise ValueError("members must be distinct task names")
    grid: list[list[AttemptSlot | None]] = [[None] * k for _ in members]
    for slot in slots:
        position = index.get(slot.task)
        if position is None:
            raise ValueError(f"slot for task {slot.task!r}, which is not a selected member")
        if not 1 <= slot.attempt <= k:
            raise ValueError(f"slot {slot.task!r} attempt {slot.attempt} is outside 1..k={k}")
        line = grid[position]
        if line[slot.attempt - 1] is not None:
            raise ValueError(f"two slots for {slot.task!r} attempt {slot.attempt}")
        line[slot.attempt - 1] = slot
    return grid


def _member_row(task: str, k: int, line: list[AttemptSlot | None]) -> MemberRow:
    attempts: list[float | MissingState] = []
    rewards: list[float] = []
    for slot in line:
        if slot is None:
            attempts.append("undispatched")
        elif slot.state == "scored":
            if slot.reward is None or not math.isfinite(slot.reward):
                raise ValueError(f"scored slot {task!r} attempt {slot.attempt} has no finite reward")
            attempts.append(slot.reward)
            rewards.append(slot.reward)
        elif slot.reward is None or slot.state == "invalidated":
            attempts.append(slot.state)
        else:
            raise ValueError(f"{slot.state} slot {task!r} attempt {slot.attempt} cannot carry a reward")
    scored = len(rewards)
    binary = scored > 0 and all(r in (0.0, 1.0) for r in rewards)
    return MemberRow(
        task=task,
        attempts=attempts,
        scored=scored,
        mean=math.fsum(rewards) / scored if scored else None,
        passes=sum(r == 1.0 for r in rewards) if binary else None,
        complete=scored == k,
    )


_EXACT_GROUPS = 64


def _curve(rewards_by_task: Sequence[Sequence[float]]) -> list[CurvePoint]:
    """Equal-task-weight mean of the per-task estimators at every k' up to the largest n.

    Tasks with the same number n of scored attempts share one exact pass over the binomials, which
    gives their sums as integer ratios. The mean is exact too, rounded once per point, when the
    tasks have at most `_EXACT_GROUPS` different n (every real job: n is the attempt count, or a
    little less where attempts are missing), so equal inputs give bit-identical curves on every
    surface. Beyond that, adding fractions with unrelated denominators grows quadratically, so each
    group's sum is rounded and the groups are added with fsum, still independent of their order.
    """
    by_n: dict[int, dict[int, int]] = {}
    for rewards in rewards_by_task:
        if rewards:
            passes = by_n.setdefault(len(rewards), {})
            c = sum(r == 1.0 for r in rewards)
            passes[c] = passes.get(c, 0) + 1
    depth = max(by_n, default=0)
    parts: list[list[tuple[int, int, int]]] = [[] for _ in range(depth)]
    tasks = [0] * depth
    for n, passes in sorted(by_n.items()):
        weight = sum(passes.values())
        for i, sums in enumerate(curve_sums(n, passes)):
            parts[i].append(sums)
            tasks[i] += weight
    exact = len(by_n) <= _EXACT_GROUPS
    points = []
    for i in range(depth):
        at, hat = (_mean_of_ratios(parts[i], part, tasks[i], exact=exact) for part in (1, 2))
        points.append(CurvePoint(k=i + 1, pass_at_k=at, pass_hat_k=hat, tasks=tasks[i]))
    return points


def _mean_of_ratios(ratios: list[tuple[int, int, int]], part: int, count: int, *, exact: bool) -> float:
    """(Σ ratios[j][part] / ratios[j][0]) / count, exactly rounded when `exact` (int / int is)."""
    if len(ratios) == 1:
        return ratios[0][part] / (ratios[0][0] * count)
    if exact:
        total = sum((Fraction(r[part], r[0]) for r in ratios), Fraction(0)) / count
        return total.numerator / total.denominator
    return math.fsum(r[part] / r[0] for r in ratios) / count
