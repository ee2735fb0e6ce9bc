"""A paired comparison of two runs, as `el job compare`, the API and the console's compare page
return it."""

from typing import Annotated, Literal

from pydantic import Field
from pydantic.dataclasses import dataclass

from envloop.core.display import DifferenceUnit
from envloop.core.lazy import LazyModel
from envloop.core.metrics import ScoreCounts, TaskDifference
from envloop.core.stats import PAIRED_METHOD
from envloop.core.structured import Definition
from envloop.wire.leaderboard import RunSummary
from envloop.wire.request import REQUEST


class Side(RunSummary):
    score_counts: ScoreCounts


AttemptState = Literal["scored", "waiting", "missing", "cancelled", "invalidated", "undispatched"]
"""One attempt as a comparison shows it: `missing` finished without a reward (an execution failure
or a verifier that gave none), `invalidated` only what a person excluded."""


class AttemptOutcome(LazyModel):
    """One attempt of one side at one task, and why it did not pass."""

    attempt: int
    trial_id: str | None = Field(description="absent for an attempt never dispatched")
    state: AttemptState
    reward: float | None = Field(description="the counted reward; absent unless scored")
    reason: str | None = Field(
        description="why it did not pass: the error type of a failed trial, `reward 0` (with the "
        "verifier's note, if any) for a reward below 1, the verifier's note for a missing reward; "
        "absent for a pass"
    )
    tokens: int | None = Field(
        default=None, description="the model tokens it used, input and output; absent when none were recorded"
    )
    cost: float | None = Field(
        default=None,
        description="its tokens' cost under the price table; absent without a price for its model",
    )
    duration_sec: float | None = Field(default=None, description="from start to finish; absent until it ends")


class SideUsage(LazyModel):
    """One side's mean use per attempt, over the attempts that recorded it."""

    tokens: float | None = Field(description="mean model tokens per attempt that recorded usage")
    cost: float | None = Field(description="mean cost per attempt; absent when any such attempt has no price")
    duration_sec: float | None = Field(description="mean seconds per finished attempt")


class UsageDelta(LazyModel):
    """What B used against A, per attempt: the means of each side and B minus A."""

    a: SideUsage
    b: SideUsage
    tokens: float | None = Field(description="B - A mean tokens per attempt")
    cost: float | None = Field(description="B - A mean cost per attempt")
    duration_sec: float | None = Field(description="B - A mean seconds per attempt")


class TaskAttempts(LazyModel):
    """A task's attempts on both sides, in attempt order, so a change can be read as its causes."""

    task: str
    a: list[AttemptOutcome]
    b: list[AttemptOutcome]
    usage: UsageDelta | None = Field(default=None, description="tokens, cost and duration, B against A")


class Excluded(LazyModel):
    task: str
    reason: str


class DimensionComparison(LazyModel):
    name: str
    definition: Definition | None = None
    n_tasks: int = 0
    difference: float | None = Field(default=None, description="B - A")
    stderr: float | None = None
    ci95: tuple[float, float] | None = None
    ci95_clamped: bool = Field(default=False, description="the t interval was cut at the scale's range")
    p_value: float | None = None
    no_interval: str | None = Field(default=None, description="why there is no interval and p-value")
    correlation: float | None = None
    refused: str | None = Field(default=None, description="why this dimension is not compared")


class Comparison(LazyModel):
    a: Side
    b: Side
    method: str = Field(default=PAIRED_METHOD, description="where the interval and the p-value come from")
    unit: DifferenceUnit = Field(
        description="points: both sides' rewards are rates in [0, 1], so differences read as percentage "
        "points (0.05 = +5.0 pts); reward: differences on the rewards' own scale"
    )
    n_tasks: int = Field(description="tasks both sides scored")
    improved: int = Field(description="tasks both scored where B's mean reward is higher than A's")
    regressed: int = Field(description="tasks both scored where B's mean reward is lower than A's")
    unchanged: int = Field(description="tasks both scored with equal mean rewards")
    difference: float | None = Field(description="mean per-task difference, B minus A")
    stderr: float | None
    ci95: tuple[float, float] | None = Field(
        description="95% interval of the difference from the paired t test (see `method`); for rates "
        "in [0, 1] cut at [-1, 1]"
    )
    ci95_clamped: bool = Field(
        default=False, description="the t interval reached past [-1, 1] and was cut at the possible range"
    )
    p_value: float | None = Field(description="two-sided p-value of the same paired t test")
    no_interval: str | None = Field(
        default=None, description="why there is no interval and p-value (the t test cannot measure it)"
    )
    correlation: float | None = Field(description="correlation of the two runs' per-task scores")
    only_a: int = Field(description="tasks only A scored (excluded)")
    only_b: int = Field(description="tasks only B scored (excluded)")
    excluded: list[Excluded]
    comparable: bool = Field(description="same dataset revision, runner, attempts and task selection")
    warnings: list[str]
    tasks: list[TaskDifference]
    dimensions: list[DimensionComparison]
    attempts: list[TaskAttempts] = Field(
        default_factory=list, description="every task of either side: each side's attempts and reasons"
    )
    usage: UsageDelta | None = Field(
        default=None, description="tokens, cost and duration per attempt over every task, B against A"
    )
    currency: str | None = Field(default=None, description="the price table's currency of every cost")


@dataclass(config=REQUEST, frozen=True)
class CompareRuns:
    job_a: Annotated[str, Field(description="the reference run (before)")]
    job_b: Annotated[str | None, Field(description="the run compared to it; absent: two profiles of A")] = (
        None
    )
    profile_a: str | None = None
    profile_b: str | None = None


__all__ = [
    "CompareRuns",
    "Comparison",
    "DimensionComparison",
    "Excluded",
    "Side",
]
