"""A job's result: each profile's metrics with its structured-result summary."""

from pydantic import Field

from envloop.core.flags import FlagCounts
from envloop.core.lazy import LazyModel
from envloop.core.metrics import ProfileMetrics
from envloop.core.status import JobStatus
from envloop.core.structured import StructuredSummary


class ProfileResult(ProfileMetrics):
    """A profile's metrics with the aggregate of its trials' declared structured results."""

    structured: StructuredSummary
    flags: FlagCounts = Field(default_factory=FlagCounts, description="the profile's flagged trials")


class JobResult(LazyModel):
    id: str
    status: JobStatus
    attempts: int
    profiles: dict[str, ProfileResult]
    flags: FlagCounts = Field(
        default_factory=FlagCounts,
        description="flagged trials (a flag never changes a reward): how many, and how many of each kind",
    )
