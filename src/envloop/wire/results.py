"""A job's result: each profile's metrics with its structured-result summary."""

from pydantic import Field

from envloop.core.flags import FlagCounts
from envloop.core.lazy import LazyModel
from envloop.core.metrics import ProfileMetrics
from envloop.core.oracle_check import OracleCheck
from envloop.core.status import JobStatus
from envloop.core.structured import StructuredSummary
from envloop.core.trial import VerifierEnvironment


class ProfileResult(ProfileMetrics):
    """A profile's metrics with the aggregate of its trials' declared structured results."""

    structured: StructuredSummary
    flags: FlagCounts = Field(default_factory=FlagCounts, description="the profile's flagged trials")
    oracle: OracleCheck | None = Field(
        default=None,
        description="for a profile whose agent is the oracle: the tasks it passes and the ones it does not",
    )


class JobResult(LazyModel):
    id: str
    status: JobStatus
    attempts: int
    profiles: dict[str, ProfileResult]
    verifier_environment: VerifierEnvironment = Field(
        default="task",
        description="where the job ran its verifiers: as each task declares, or every one separate",
    )
    flags: FlagCounts = Field(
        default_factory=FlagCounts,
        description="flagged trials (a flag never changes a reward): how many, and how many of each kind",
    )


__all__ = [
    "JobResult",
    "ProfileResult",
]
