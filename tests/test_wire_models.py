"""The wire models type statuses and counts with the core's Literals: an answer that carries a
status envloop does not have is refused where it is read, not passed on as text."""

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from envloop.core.status import ErrorType
from envloop.wire import JobResult, JobView, TrialEvent


def job_view(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "job_1",
        "status": "running",
        "dataset": "d@1",
        "runner": "envloop/shell@1",
        "profiles": ["p@1"],
        "attempts": 1,
        "tasks": ["t"],
        "concurrency": None,
        "max_steps": None,
        "agent_timeout_sec": None,
        "verifier_timeout_sec": None,
        "tags": {},
        "request_id": None,
        "cancel_requested": False,
        "counts": {"pending": 1, "running": 0, "completed": 0, "failed": 0, "cancelled": 0},
        "created_at": datetime.now(UTC).isoformat(),
        "finished_at": None,
    }
    return base | changes


def test_a_job_reads_back_with_a_known_status_and_counts_by_trial_status() -> None:
    view = JobView.model_validate(job_view())
    assert view.status == "running"
    assert view.counts["pending"] == 1


@pytest.mark.parametrize(
    "changes",
    [{"status": "done"}, {"counts": {"finished": 1}}],
    ids=["unknown job status", "count of an unknown trial status"],
)
def test_a_job_with_an_unknown_status_is_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        JobView.model_validate(job_view(**changes))


def test_a_result_with_an_unknown_status_is_refused() -> None:
    with pytest.raises(ValidationError):
        JobResult.model_validate({"id": "job_1", "status": "finished", "attempts": 1, "profiles": {}})


def event(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "trl_1",
        "job_id": "job_1",
        "profile": "p@1",
        "task": "t",
        "attempt": 1,
        "status": "failed",
        "reward": None,
        "error_type": "agent_error",
        "invalidated": False,
    }
    return base | changes


def test_every_error_type_of_the_core_reads_back_and_no_other() -> None:
    for error_type in ErrorType:
        assert TrialEvent.model_validate(event(error_type=error_type)).error_type == error_type
    with pytest.raises(ValidationError):
        TrialEvent.model_validate(event(error_type="oops"))
