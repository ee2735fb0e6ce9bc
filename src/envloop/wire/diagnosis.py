"""A job's diagnosis: failures grouped by reason, sandboxes, warnings."""

from typing import Literal

from pydantic import Field

from envloop.core.lazy import LazyModel
from envloop.core.status import ErrorType

FailureKind = Literal["failed", "no_reward", "cancelled", "invalidated"]
Cause = Literal["agent", "model", "verifier", "environment", "infrastructure", "user"]
"""Whose doing a failure or a missing reward is (`services.failures` says how it is decided)."""

EXAMPLES = 5


class FailureGroup(LazyModel):
    kind: FailureKind
    error_type: ErrorType | None = Field(description="for failed trials, the error type")
    reason: str = Field(description="the first line of the error message, reward note or invalidation reason")
    cause: Cause = Field(
        description="whose doing: agent (its own crash, timeout or resource exhaustion, or a verifier "
        "that failed on its output while it scored other attempts at the task), model, verifier (not "
        "shown to work for the task), environment, infrastructure, user (cancelled or invalidated)"
    )
    count: int
    rewarded: int = Field(
        default=0, description="of which still have a counted reward (a failed trial the verifier scored)"
    )
    by_profile: dict[str, int]
    trial_ids: list[str] = Field(description=f"up to {EXAMPLES} of the group's trials, in grid order")


class WarningGroup(LazyModel):
    text: str
    count: int = Field(description="trials that carry this warning")
    trial_ids: list[str] = Field(description=f"up to {EXAMPLES} of them, in grid order")


class FlagGroup(LazyModel):
    kind: str
    detail: str
    count: int = Field(description="trials that carry this flag")
    trial_ids: list[str] = Field(description=f"up to {EXAMPLES} of them, in grid order")


class NotRunGroup(LazyModel):
    text: str = Field(description="N tasks not run: reason")
    reason: str
    tasks: list[str]


class JobDiagnosis(LazyModel):
    status_note: str | None = Field(
        default=None,
        description="why a finished job reads failed or cancelled, in one sentence (null otherwise)",
    )
    not_run: list[NotRunGroup] = Field(
        default_factory=list,
        description="tasks the job left out at submission (--skip-unsupported): they have no trials",
    )
    failures: list[FailureGroup]
    sandboxes: dict[str, int] = Field(description="finished trials by the sandbox they ran in")
    warnings: list[WarningGroup] = Field(description="the trials' warnings, most frequent first")
    flags: list[FlagGroup] = Field(
        default_factory=list,
        description="the trials' flags by kind and detail, most frequent first (never a change of reward)",
    )


__all__ = [
    "FailureGroup",
    "FailureKind",
    "FlagGroup",
    "JobDiagnosis",
    "NotRunGroup",
    "WarningGroup",
]
