"""A comparison plan: tasks and attempts needed to detect an effect."""

from typing import Annotated

from pydantic import Field
from pydantic.dataclasses import dataclass

from envloop.core.lazy import LazyModel
from envloop.core.planning import VarianceComponents
from envloop.wire.compare import Side
from envloop.wire.request import REQUEST


class PlanOption(LazyModel):
    attempts: int = Field(description="attempts per task (k)")
    tasks: int | None = Field(description="tasks needed; null beyond any realistic number")
    total_attempts: int | None = Field(description="tasks x attempts, per run")
    fits_dataset: bool = Field(description="the dataset revision has that many tasks")


class Plan(LazyModel):
    baseline: Side
    effect: float = Field(description="difference to detect, in reward units (0.03 = 3 points)")
    alpha: float
    power: float
    correlation: float = Field(description="assumed correlation of the two runs' task scores")
    variance: VarianceComponents
    options: list[PlanOption]
    dataset_tasks: int = Field(description="tasks in the baseline's dataset revision")
    attempts_with_all_tasks: int | None = Field(
        description="attempts per task that let every task of the dataset detect the effect; "
        "null when no allowed number can (task-to-task variation alone is too large)"
    )
    detectable_effect: float = Field(
        description="smallest effect the baseline's own design (its tasks and attempts) detects"
    )
    notes: list[str]


@dataclass(config=REQUEST, frozen=True)
class PlanComparison:
    job_id: str
    effect: Annotated[float, Field(gt=0, description="difference to detect, in reward units")]
    profile: str | None = None
    power: Annotated[float, Field(gt=0, lt=1)] = 0.8
    alpha: Annotated[float, Field(gt=0, lt=1)] = 0.05
    correlation: Annotated[float, Field(ge=-1, le=1)] = 0.0


__all__ = [
    "Plan",
    "PlanComparison",
    "PlanOption",
]
