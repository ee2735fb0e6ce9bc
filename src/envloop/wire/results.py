"""A job's result: each profile's metrics with its structured-result summary."""

from pydantic import BaseModel

from envloop.core.metrics import ProfileMetrics
from envloop.core.status import JobStatus
from envloop.core.structured import StructuredSummary


class ProfileResult(ProfileMetrics):
    """A profile's metrics with the aggregate of its trials' declared structured results."""

    structured: StructuredSummary


class JobResult(BaseModel):
    id: str
    status: JobStatus
    attempts: int
    profiles: dict[str, ProfileResult]
