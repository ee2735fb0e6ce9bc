"""A job's result: each profile's metrics with its structured-result summary."""

from envloop.core.metrics import ProfileMetrics
from envloop.core.status import JobStatus
from envloop.core.structured import StructuredSummary
from envloop.wire.base import WireModel


class ProfileResult(ProfileMetrics):
    """A profile's metrics with the aggregate of its trials' declared structured results."""

    model_config = WireModel.model_config

    structured: StructuredSummary


class JobResult(WireModel):
    id: str
    status: JobStatus
    attempts: int
    profiles: dict[str, ProfileResult]
