"""A job's results broken down by a field of its tasks' metadata (JSONL `metadata`, task.toml
`[metadata]`): score and coverage per group of tasks, per profile."""

from typing import Annotated

from pydantic import Field
from pydantic.dataclasses import dataclass

from envloop.core.lazy import LazyModel
from envloop.core.metrics import ScoreCounts
from envloop.wire.request import REQUEST


class GroupMetrics(LazyModel):
    score: float | None
    stderr: float | None = Field(description="standard error of score, clustered by task")
    ci95: tuple[float, float] | None
    pass_at_k: float | None
    pass_hat_k: float | None
    score_counts: ScoreCounts
    coverage: str = Field(description="score 60%, 5/6 attempts scored, 2/3 members complete")


class BreakdownGroup(LazyModel):
    value: str | None = Field(description="the field's value; null for the tasks that do not set it")
    tasks: list[str] = Field(description="the group's tasks, in dataset order")
    profiles: dict[str, GroupMetrics]


class Breakdown(LazyModel):
    job_id: str
    by: str = Field(description="the metadata field grouped by")
    fields: list[str] = Field(description="every metadata field the job's tasks set")
    multi_valued: bool = Field(
        description="some task sets the field to a list: it counts in the group of each of its values, "
        "so groups overlap and their attempts add up to more than the job's"
    )
    groups: list[BreakdownGroup]


@dataclass(config=REQUEST, frozen=True)
class JobBreakdown:
    job_id: str
    by: Annotated[str, Field(min_length=1, max_length=200, description="a metadata field of the tasks")]


__all__ = [
    "Breakdown",
    "BreakdownGroup",
    "GroupMetrics",
    "JobBreakdown",
]
