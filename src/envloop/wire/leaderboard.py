"""Leaderboard rows and the run summary every comparison shows."""

from datetime import datetime

from pydantic import ConfigDict, Field

from envloop.core.lazy import LazyModel
from envloop.core.status import JobStatus
from envloop.core.structured import Aggregate, DimensionSummary


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


class BoardRow(BoardEntry):
    rank: int | None = Field(description="1 = best score; equal scores share a rank; null without a score")
    tied: bool = Field(description="another row has exactly the same score")
