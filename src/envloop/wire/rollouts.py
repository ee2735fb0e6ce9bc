"""Rollouts and the progress feed on the wire."""

from typing import Literal

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

from envloop.core.lazy import LazyModel
from envloop.core.status import ErrorType, TrialStatus
from envloop.core.trajectory import Trajectory
from envloop.wire.jobs import JobView
from envloop.wire.request import REQUEST
from envloop.wire.trials import TrialView


class RolloutRequest(LazyModel):
    # Built at import: FastAPI reads a request body's model as it builds its routes, and a deferred
    # one makes it attach the parameter's alias where pydantic ignores it (with a warning).
    model_config = ConfigDict(extra="forbid", defer_build=False)

    dataset: str = Field(description="NAME@N or NAME@latest")
    task: str = Field(description="the dataset member to attempt")
    profile: str = Field(description="NAME@VERSION")
    max_steps: int | None = Field(default=None, ge=1)
    agent_timeout_sec: float | None = Field(default=None, gt=0)
    verifier_timeout_sec: float | None = Field(default=None, gt=0)
    agent_setup_timeout_sec: float | None = Field(default=None, gt=0)
    tags: dict[str, str] = Field(default_factory=dict)
    request_id: str | None = Field(default=None, min_length=1, max_length=200)


class RolloutView(LazyModel):
    job_id: str
    trial: TrialView
    trajectory: Trajectory | None = Field(
        default=None,
        description="the trajectory once the runner has kept it, null before: its first page of steps "
        "(GET /v1/trials/{id}/steps/page from `steps_next_offset` reads the rest)",
    )
    steps_total: int | None = Field(default=None, description="steps in the whole trajectory")
    steps_next_offset: int | None = Field(
        default=None, description="where the steps left out of `trajectory` start; null when it has them all"
    )
    warnings: list[str] = Field(default_factory=list)


class JobEvent(LazyModel):
    event: Literal["job"] = "job"
    job: JobView


class TrialEvent(LazyModel):
    event: Literal["trial"] = "trial"
    id: str
    job_id: str
    profile: str
    task: str
    attempt: int
    status: TrialStatus
    reward: float | None
    error_type: ErrorType | None
    invalidated: bool


ProgressEvent = JobEvent | TrialEvent


@dataclass(config=REQUEST, frozen=True)
class StartRollout:
    request: RolloutRequest


__all__ = [
    "JobEvent",
    "ProgressEvent",
    "RolloutRequest",
    "RolloutView",
    "StartRollout",
    "TrialEvent",
]
