"""Leaderboard rows and the run summary every comparison shows."""

from datetime import datetime
from typing import Annotated, Any

from pydantic import ConfigDict, Field, computed_field, model_validator
from pydantic.dataclasses import dataclass

from envloop.core.lazy import LazyModel
from envloop.core.metrics import score_bounds
from envloop.core.status import JobStatus
from envloop.core.structured import Aggregate, DimensionSummary
from envloop.wire.request import REQUEST


class RunSummary(LazyModel):
    """One profile's run as every comparison shows it: what ran, and its score with its interval
    and coverage (a board row, each side of `el job compare`, the baseline of a plan)."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    profile: str
    model: str = Field(description="the profile's MODEL_NAME, else the profile reference")
    dataset: str
    runner: str
    attempts: int
    job_status: JobStatus
    coverage: str = Field(description="score 60%, 5/6 attempts scored, 2/3 members complete")
    score: float | None
    stderr: float | None = Field(description="standard error of score, clustered by task")
    ci95: tuple[float, float] | None


class BoardEntry(RunSummary):
    """A row's saved snapshot: everything the row shows, as it was when the row was added."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    pass_: float | None = Field(alias="pass")
    pass_at_k: float | None
    pass_hat_k: float | None
    scored: int
    missing: int
    total: int
    invalid: int
    invalidated: int
    complete_members: int
    total_members: int
    composite: Aggregate | None = Field(description="mean composite of the declared structured results")
    dimensions: dict[str, DimensionSummary]
    added_at: datetime
    lower_bound: float = Field(
        default=0.0, description="the score over every requested attempt, each missing one counted as 0"
    )
    upper_bound: float = Field(
        default=1.0,
        description="the same with each missing attempt counted as the best reward (1, or the row's "
        "highest reward when higher)",
    )
    flagged: int = Field(default=0, description="trials of the run that carry a flag")
    flags: dict[str, int] = Field(default_factory=dict, description="flagged trials by flag kind")

    @model_validator(mode="before")
    @classmethod
    def _bounds_of_older_snapshots(cls, data: Any) -> Any:
        """Rows saved before the bounds were: they follow from the mean, the counts and (for
        rewards above 1) the mean itself as the best reward known."""
        if isinstance(data, dict) and "lower_bound" not in data:
            score, total, missing = data.get("score"), int(data.get("total", 0)), int(data.get("missing", 0))
            reward_sum = (score or 0.0) * (total - missing)
            lower, upper = score_bounds(reward_sum, total, missing, score or 1.0)
            data = {**data, "lower_bound": lower, "upper_bound": upper}
        return data


class BoardRow(BoardEntry):
    rank: int = Field(
        description="1 = best lower bound (missing attempts counted as 0); at an equal lower bound fewer "
        "missing attempts rank first; rows equal in both share a rank"
    )
    tied: bool = Field(description="another row has the same lower bound and missing count")
    not_separated_from: list[int] = Field(
        description="ranks of the rows whose [lower_bound, upper_bound] interval overlaps this row's: "
        "what the missing attempts would have scored could change their order"
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def separated(self) -> bool:
        """Whether this row's interval overlaps no other row's: its place holds whatever the
        missing attempts would have scored."""
        return not self.not_separated_from


@dataclass(config=REQUEST, frozen=True)
class ShowLeaderboard:
    dataset: Annotated[
        str | None, Field(description="one revision's board (NAME@N); all boards if absent")
    ] = None


@dataclass(config=REQUEST, frozen=True)
class AddToLeaderboard:
    job_id: str
    profile: Annotated[str | None, Field(description="only this profile of the job (NAME@VERSION)")] = None


__all__ = [
    "AddToLeaderboard",
    "BoardEntry",
    "BoardRow",
    "RunSummary",
    "ShowLeaderboard",
]
