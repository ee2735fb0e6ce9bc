"""Job submission: validated before anything is created, idempotent with a request ID, exportable."""

from pathlib import Path

import pytest
from sqlalchemy import func, select

from envloop.errors import ConflictError, NotFoundError, UserError
from envloop.services import datasets, job_submission, jobs, profiles
from envloop.services.context import Context
from envloop.store.tables import Job, Trial
from envloop.wire.jobs import parse_job_config
from tests.conftest import EXAMPLES, write_profile


@pytest.fixture
def ready(ctx: Context, tmp_path: Path) -> Context:
    datasets.push_dataset(ctx, EXAMPLES / "tasks", "demo")
    for name, params in {
        "oracle": {"AGENT_NAME": "oracle"},
        "nop": {"AGENT_NAME": "nop"},
        "extra": {"AGENT_NAME": "nop", "TEMPERATURE": "0.7"},
    }.items():
        doc = profiles.read_profile_file(write_profile(tmp_path / f"{name}.json", params))
        profiles.create_profile(ctx, name, "1", doc)
    return ctx


def _counts(ctx: Context) -> tuple[int, int]:
    with ctx.store.read() as session:
        return (
            session.scalar(select(func.count()).select_from(Job)) or 0,
            session.scalar(select(func.count()).select_from(Trial)) or 0,
        )


def test_submission_creates_every_trial_for_every_profile(ready: Context) -> None:
    result = job_submission.submit_job(
        ready, job_submission.JobRequest(dataset="demo@1", profiles=["oracle@1", "nop@1"], attempts=3)
    )
    assert sum(result.job.counts.values()) == 5 * 2 * 3
    assert result.job.dataset == "demo@1" and result.job.profiles == ["oracle@1", "nop@1"]


def test_latest_resolves_to_the_concrete_revision_at_submit_time(ready: Context) -> None:
    result = job_submission.submit_job(
        ready, job_submission.JobRequest(dataset="demo@latest", profiles=["nop@1"])
    )
    assert result.job.dataset == "demo@1"


@pytest.mark.parametrize(
    ("request_args", "error", "message"),
    [
        ({"dataset": "missing@1", "profiles": ["nop@1"]}, NotFoundError, "unknown dataset"),
        ({"dataset": "demo@1", "profiles": ["ghost@1"]}, NotFoundError, "unknown profile"),
        ({"dataset": "demo@1", "profiles": ["nop@1"], "tasks": ["no-such-task"]}, UserError, "no task"),
        ({"dataset": "demo@1", "profiles": ["nop@1", "nop@1"]}, UserError, "twice"),
    ],
)
def test_bad_submissions_are_refused_and_create_nothing(
    ready: Context, request_args: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        job_submission.submit_job(ready, job_submission.JobRequest.model_validate(request_args))
    assert _counts(ready) == (0, 0)


def test_params_the_runner_does_not_read_produce_a_warning(ready: Context) -> None:
    result = job_submission.submit_job(
        ready, job_submission.JobRequest(dataset="demo@1", profiles=["extra@1"])
    )
    assert any("TEMPERATURE" in w for w in result.warnings)


def test_the_same_request_id_and_body_returns_the_same_job(ready: Context) -> None:
    request = job_submission.JobRequest(dataset="demo@1", profiles=["nop@1"], request_id="r-1")
    first = job_submission.submit_job(ready, request)
    again = job_submission.submit_job(ready, request)
    assert again.existing and again.job.id == first.job.id
    assert _counts(ready) == (1, 5)


def test_the_same_request_id_with_another_body_is_refused(ready: Context) -> None:
    job_submission.submit_job(
        ready, job_submission.JobRequest(dataset="demo@1", profiles=["nop@1"], request_id="r-1")
    )
    with pytest.raises(ConflictError, match="r-1"):
        job_submission.submit_job(
            ready,
            job_submission.JobRequest(dataset="demo@1", profiles=["nop@1"], attempts=2, request_id="r-1"),
        )


def test_task_selection_keeps_dataset_order(ready: Context) -> None:
    result = job_submission.submit_job(
        ready,
        job_submission.JobRequest(dataset="demo@1", profiles=["nop@1"], tasks=["sum-numbers", "fix-script"]),
    )
    assert result.job.tasks == ["fix-script", "sum-numbers"]


def test_export_reproduces_the_submission(ready: Context) -> None:
    original = job_submission.submit_job(
        ready,
        job_submission.JobRequest(
            dataset="demo@latest",
            profiles=["oracle@1"],
            attempts=2,
            tasks=["hello-file"],
            concurrency=2,
            agent_timeout_sec=5,
            tags={"round": "1"},
        ),
    ).job
    exported = jobs.export_job(ready, original.id)
    again = job_submission.submit_job(ready, parse_job_config(exported.model_dump_json(), "job.json")).job
    keep = ("dataset", "profiles", "attempts", "tasks", "concurrency", "agent_timeout_sec", "tags")
    assert {k: getattr(again, k) for k in keep} == {k: getattr(original, k) for k in keep}


def test_export_never_contains_secret_values(ready: Context, tmp_path: Path) -> None:
    doc = profiles.read_profile_file(
        write_profile(
            tmp_path / "s.json", {"AGENT_NAME": "nop", "MODEL_API_KEY": "sk-very-secret"}, ["MODEL_API_KEY"]
        )
    )
    profiles.create_profile(ready, "secretive", "1", doc)
    job = job_submission.submit_job(
        ready, job_submission.JobRequest(dataset="demo@1", profiles=["secretive@1"])
    ).job
    assert "sk-very-secret" not in jobs.export_job(ready, job.id).model_dump_json()


def test_malformed_job_config_is_refused_naming_the_field() -> None:
    with pytest.raises(UserError, match="attempts"):
        parse_job_config('{"dataset": "d@1", "profiles": ["p@1"], "attempts": 0}', "job.json")
    with pytest.raises(UserError, match="not valid JSON"):
        parse_job_config("{", "job.json")
