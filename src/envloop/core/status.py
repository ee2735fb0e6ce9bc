"""Trial and job statuses, error types, and the job roll-up rule of SPEC section 2."""

from collections.abc import Iterable
from typing import Literal, get_args

TrialStatus = Literal["pending", "running", "completed", "failed", "cancelled"]
JobStatus = Literal["pending", "running", "completed", "failed", "cancelled"]
ErrorType = Literal[
    "environment_error",
    "agent_error",
    "agent_timeout",
    "model_error",
    "verifier_error",
    "verifier_timeout",
    "resource_exhausted",
    "infrastructure_error",
]

TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
ERROR_TYPES: tuple[str, ...] = get_args(ErrorType)


def is_terminal(status: str) -> bool:
    return status in TERMINAL


def rollup_job_status(statuses: Iterable[str]) -> JobStatus:
    """A job is not terminal while any trial is not; then failed > cancelled > completed."""
    seen = set(statuses)
    if not seen:
        return "completed"
    if seen - TERMINAL:
        return "pending" if seen == {"pending"} else "running"
    if "failed" in seen:
        return "failed"
    if "cancelled" in seen:
        return "cancelled"
    return "completed"
