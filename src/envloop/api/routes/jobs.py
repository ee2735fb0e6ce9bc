"""Jobs: submit (idempotent with a request ID), read, list, result, cancel, export, trials, events."""

from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.responses import StreamingResponse
from pydantic import StringConstraints

from envloop.api.auth import JobReader, ProjectContext
from envloop.api.events import SSE_RESPONSE, event_stream
from envloop.api.schemas import ERRORS
from envloop.core.status import JobStatus, TrialStatus
from envloop.services import breakdown, diagnosis, jobs, results, samples, trials, usage
from envloop.services.breakdown import Breakdown
from envloop.services.diagnosis import JobDiagnosis
from envloop.services.errors import UserError
from envloop.services.jobs import JobRequest, JobView, SubmitResult
from envloop.services.results import JobResult
from envloop.services.rollouts import ProgressFeed
from envloop.services.samples import SamplePage, SampleQuery
from envloop.services.trials import TrialView
from envloop.services.usage import JobUsage

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses=ERRORS)
TagFilter = Annotated[str, StringConstraints(pattern="^[^=]+=")]


def parse_tags(values: list[str]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise UserError(f"invalid tag {value!r}: expected key=value")
        tags[key] = val
    return tags


@router.post(
    "",
    status_code=201,
    responses={200: {"model": SubmitResult, "description": "The request ID matched an earlier submission"}},
)
def submit_job(request: JobRequest, ctx: ProjectContext, response: Response) -> SubmitResult:
    """Validate everything, then create every trial pending at once (or nothing, on error)."""
    submitted = jobs.submit_job(ctx, request)
    if submitted.existing:
        response.status_code = 200
    return submitted


@router.get("")
def list_jobs(
    ctx: ProjectContext,
    status: JobStatus | None = None,
    tag: Annotated[list[TagFilter] | None, Query(description="key=value; repeat to require several")] = None,
    limit: Annotated[int, Query(ge=1, le=jobs.MAX_PAGE, description="jobs per page")] = 50,
    before: Annotated[
        str | None,
        Query(
            max_length=64,
            description="a job ID: the page of jobs created before it (pass the last ID of a page to "
            "get the next one)",
        ),
    ] = None,
) -> list[JobView]:
    """Jobs, newest first, one page at a time (filtered, ordered and paged in the database)."""
    return jobs.list_jobs(ctx, status=status, tags=parse_tags(tag or []), limit=limit, before=before)


@router.get("/{job_id}")
def get_job(job_id: str, ctx: JobReader) -> JobView:
    return jobs.get_job(ctx, job_id)


@router.get("/{job_id}/result")
def job_result(job_id: str, ctx: JobReader) -> JobResult:
    """Coverage, score, pass, pass@k, pass^k, curve and per-task rows, per profile."""
    return results.job_result(ctx, job_id)


@router.get("/{job_id}/diagnosis")
def job_diagnosis(job_id: str, ctx: JobReader) -> JobDiagnosis:
    """Why attempts are missing (failures by reason), how trials were isolated, and their warnings."""
    return diagnosis.job_diagnosis(ctx, job_id)


@router.post("/{job_id}/cancel")
def cancel_job(job_id: str, ctx: ProjectContext) -> JobView:
    """Pending trials are cancelled at once; running ones are stopped by their workers shortly."""
    return jobs.cancel_job(ctx, job_id)


@router.get("/{job_id}/export")
def export_job(job_id: str, ctx: JobReader) -> JobRequest:
    """The job's configuration, which POST /v1/jobs accepts to run it again (never secret values)."""
    return jobs.export_job(ctx, job_id)


@router.get("/{job_id}/trials")
def list_trials(
    job_id: str,
    ctx: JobReader,
    status: TrialStatus | None = None,
    task: str | None = None,
    limit: Annotated[int | None, Query(ge=1, le=10000)] = None,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> list[TrialView]:
    """The job's trials by profile, task and attempt; `limit` and `offset` page through big jobs."""
    return trials.list_trials(ctx, job_id, status=status, task=task, limit=limit, offset=offset)


@router.get("/{job_id}/breakdown")
def job_breakdown(
    job_id: str,
    ctx: JobReader,
    by: Annotated[str, Query(min_length=1, max_length=200, description="a metadata field of the tasks")],
) -> Breakdown:
    """Score and coverage per group of tasks sharing a value of a metadata field, per profile."""
    return breakdown.job_breakdown(ctx, job_id, by)


@router.get("/{job_id}/usage")
def job_usage(job_id: str, ctx: JobReader) -> JobUsage:
    """Model calls and tokens, their cost under the operator's price table, and trial durations."""
    return usage.job_usage(ctx, job_id)


@router.get("/{job_id}/samples")
def job_samples(job_id: str, ctx: JobReader, query: Annotated[SampleQuery, Query()]) -> SamplePage:
    """One row per attempt (input, target, output, reward, status, tokens, duration), filtered,
    searched (`q`), sorted and paged in the store."""
    return samples.job_samples(ctx, job_id, query)


@router.get("/{job_id}/events", response_class=StreamingResponse, responses=SSE_RESPONSE)
def job_events(job_id: str, ctx: JobReader) -> StreamingResponse:
    """Status changes of the job and its trials as server-sent events, until the job ends."""
    return event_stream(ProgressFeed(ctx, job_id))
