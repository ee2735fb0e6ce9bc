"""A job's result: each profile's metrics with its structured-result summary."""

from envloop.core.lazy import LazyModel
from envloop.core.metrics import ProfileMetrics
from envloop.core.status import JobStatus
from envloop.core.structured import StructuredSummary


class ProfileResult(ProfileMetrics):
    """A profile's metrics with the aggregate of its trials' declared structured results."""

    structured: StructuredSummary


class JobResult(LazyModel):
    id: str
    status: JobStatus
    attempts: int
    profiles: dict[str, ProfileResult]
