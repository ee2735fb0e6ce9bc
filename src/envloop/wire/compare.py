"""A paired comparison of two runs, as `el job compare` and the API return it."""

from pydantic import Field

from envloop.core.lazy import LazyModel
from envloop.core.metrics import ScoreCounts, TaskDifference
from envloop.core.structured import Definition
from envloop.wire.leaderboard import RunSummary


class Side(RunSummary):
    score_counts: ScoreCounts


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
    correlation: float | None = None
    refused: str | None = Field(default=None, description="why this dimension is not compared")


class Comparison(LazyModel):
    a: Side
    b: Side
    n_tasks: int = Field(description="tasks both sides scored")
    difference: float | None = Field(description="mean per-task difference, B minus A")
    stderr: float | None
    ci95: tuple[float, float] | None = Field(
        description="95% interval of the difference: Student t on the per-task differences; for rates "
        "in [0, 1] cut at [-1, 1], for binary rewards widened to Newcombe's paired score interval"
    )
    ci95_clamped: bool = Field(
        default=False, description="the t interval reached past [-1, 1] and was cut at the possible range"
    )
    p_value: float | None = Field(description="two-sided paired t test of no difference")
    correlation: float | None = Field(description="correlation of the two runs' per-task scores")
    only_a: int = Field(description="tasks only A scored (excluded)")
    only_b: int = Field(description="tasks only B scored (excluded)")
    changed: int = Field(description="tasks whose content differs between the runs (excluded)")
    excluded: list[Excluded]
    comparable: bool = Field(description="same dataset revision, runner, attempts and tasks")
    warnings: list[str]
    tasks: list[TaskDifference]
    dimensions: list[DimensionComparison]
