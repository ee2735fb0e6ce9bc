"""Jobs written out by hand: the list (its tags filter is `key=value` strings) and the event stream."""

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from pydantic import StringConstraints

from envloop.api.auth import JobReader, ProjectContext
from envloop.api.events import SSE_RESPONSE, event_stream
from envloop.api.schemas import ERRORS
from envloop.core.status import JobStatus
from envloop.services import jobs
from envloop.services.errors import UserError
from envloop.services.jobs import JobView
from envloop.services.rollouts import ProgressFeed

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


@router.get("/{job_id}/events", response_class=StreamingResponse, responses=SSE_RESPONSE)
def job_events(job_id: str, ctx: JobReader) -> StreamingResponse:
    """Status changes of the job and its trials as server-sent events, until the job ends."""
    return event_stream(ProgressFeed(ctx, job_id))
