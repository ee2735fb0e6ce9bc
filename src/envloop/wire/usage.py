"""What a job's trials used: model calls and tokens, their cost under the operator's price table,
and how long the trials took, per profile and for the whole job."""

from pydantic import Field

from envloop.core.lazy import LazyModel


class Latency(LazyModel):
    trials: int = Field(description="finished trials with a start and an end")
    median_sec: float | None
    p90_sec: float | None = Field(description="90th percentile (nearest rank)")
    max_sec: float | None


class ProfileUsage(LazyModel):
    model: str | None = Field(description="the profile's MODEL_NAME, which the price table names")
    trials: int = Field(description="finished trials")
    calls: int = Field(description="model calls")
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cost: float | None = Field(description="in the price table's currency; null when it cannot be priced")
    cost_note: str | None = Field(description="why there is no cost")
    latency: Latency


class JobUsage(LazyModel):
    job_id: str
    currency: str | None = Field(description="the price table's currency; null without a price table")
    calls: int
    input_tokens: int
    output_tokens: int
    cost: float | None = Field(description="every profile's cost added up; null when one has none")
    latency: Latency
    profiles: dict[str, ProfileUsage]


__all__ = [
    "JobUsage",
    "Latency",
    "ProfileUsage",
]
