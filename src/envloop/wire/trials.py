"""Trials on the wire: one attempt, its log phases, and its kept files."""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field
from pydantic.dataclasses import dataclass

from envloop.core.destinations import Destinations
from envloop.core.lazy import LazyModel
from envloop.core.status import ErrorType, Phase, TrialStatus
from envloop.core.structured import StructuredReading
from envloop.core.trajectory import Step, Trajectory
from envloop.core.trial import TrialFlag
from envloop.wire.request import REQUEST

LogPhase = Literal[Phase.SETUP, Phase.AGENT_SETUP, Phase.AGENT, Phase.VERIFIER, Phase.ARTIFACTS]
"""The phases that keep their output (teardown keeps none)."""
LOG_FILES: dict[LogPhase, tuple[str, ...]] = {
    Phase.SETUP: ("setup/output.txt",),
    Phase.AGENT_SETUP: ("agent/install.log",),
    Phase.AGENT: ("agent/stdout.txt", "agent/stderr.txt"),
    Phase.VERIFIER: ("verifier/stdout.txt", "verifier/stderr.txt"),
    Phase.ARTIFACTS: ("collection/output.txt",),
}
"""Each phase's kept output, by phase name: a phase that kept no file reads as an empty mapping."""


class TrialView(LazyModel):
    id: str
    job_id: str
    profile: str
    task: str
    task_digest: str
    attempt: int
    status: TrialStatus
    error_type: ErrorType | None
    error_message: str | None
    exit_code: int | None
    reward: float | None
    reward_note: str | None
    dimensions: dict[str, float]
    invalidated: bool
    invalidated_reason: str | None
    sandbox: str | None
    sandbox_note: str | None
    warnings: list[str]
    phases: list[dict[str, Any]]
    runs: int
    flags: list[TrialFlag] = []
    """What a reader of the reward should know (files the agent changed that the verifier may run,
    failed model calls); a flag never changes the reward by itself."""
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    structured: StructuredReading | None = None
    """The verifier's declared result.json, validated, or why it is invalid; read by `get_trial`
    only (one file per trial is too much for lists). Null when there is none."""
    destinations: Destinations | None = None
    """The hosts and ports the trial asked its egress proxy for, with each one's requests by result
    (reached, refused, unresolved, unconnected); read by `get_trial` only. Null where no proxy
    observed the trial's network (a closed network, the local sandbox) and in lists."""


LOG_PAGE_BYTES = 1024 * 1024
"""The most of each stream one read of a phase's logs returns: a 1 GB log is read in pages (or
streamed whole from its artifact), never loaded into memory at once."""


class ArtifactInfo(LazyModel):
    path: str
    size: int


ARTIFACT_PAGE = 1000
"""The most kept files one page of a trial's listing has."""


class ArtifactPage(LazyModel):
    total: int = Field(description="kept files of the trial")
    offset: int
    items: list[ArtifactInfo] = Field(description="sorted by path")
    next_offset: int | None = Field(description="where the next page starts; null after the last file")


PAGE_STEPS = 500
"""The most steps one page of a trajectory has (it also stops at PAGE_BYTES of step JSON)."""


class StepPage(LazyModel):
    """A page of a trial's trajectory: its steps from `offset`, and its other fields."""

    trajectory: Trajectory
    """The trajectory's own fields (agent, runner, model, usage, stop reason); its `steps` are empty."""
    total: int
    offset: int
    steps: list[Step]
    next_offset: int | None
    """Where the next page starts; null after the last step."""


@dataclass(config=REQUEST, frozen=True)
class ListTrials:
    job_id: str
    status: TrialStatus | None = None
    task: str | None = None
    limit: Annotated[int | None, Field(ge=1, le=10000)] = None
    offset: Annotated[int, Field(ge=0)] = 0


@dataclass(config=REQUEST, frozen=True)
class ArtifactPath:
    trial_id: str
    path: str
    """The file's path within the trial, as the artifact list gives it."""


@dataclass(config=REQUEST, frozen=True)
class TrialTrajectory:
    trial_id: str
    format: Annotated[
        Literal["envloop", "atif"],
        Field(description="envloop (its own steps) or atif (Harbor's Agent Trajectory Interchange Format)"),
    ] = "envloop"


@dataclass(config=REQUEST, frozen=True)
class TrialLogs:
    trial_id: str
    phase: LogPhase = Phase.AGENT
    offset: Annotated[int, Field(ge=0, description="first byte of each stream to return")] = 0
    limit: Annotated[
        int, Field(ge=1, le=LOG_PAGE_BYTES, description="most bytes of each stream to return")
    ] = LOG_PAGE_BYTES


@dataclass(config=REQUEST, frozen=True)
class TrialStepPage:
    trial_id: str
    offset: Annotated[int, Field(ge=0, description="the first step to return")] = 0
    limit: Annotated[int, Field(ge=1, le=PAGE_STEPS, description="most steps to return")] = PAGE_STEPS


@dataclass(config=REQUEST, frozen=True)
class InvalidateTrial:
    trial_id: str
    reason: Annotated[str | None, Field(description="why it must not count (needed unless undo)")] = None
    undo: Annotated[bool, Field(description="count the trial again")] = False


__all__ = [
    "ARTIFACT_PAGE",
    "LOG_FILES",
    "LOG_PAGE_BYTES",
    "PAGE_STEPS",
    "ArtifactInfo",
    "ArtifactPage",
    "ArtifactPath",
    "InvalidateTrial",
    "ListTrials",
    "LogPhase",
    "StepPage",
    "TrialLogs",
    "TrialStepPage",
    "TrialTrajectory",
    "TrialView",
]
