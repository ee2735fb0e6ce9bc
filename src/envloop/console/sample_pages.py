"""A job's Samples page (`/jobs/ID/samples`, and under a share link): one row per attempt with its
input, target, output, reward, status, tokens and duration, from `services.samples`, which filters,
searches (`?q=`), sorts and pages in the store. The form's fields are the query's own names, so
the address of a page is the query that made it."""

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from envloop.console.access import Viewer, session_viewer, share_viewer
from envloop.console.render import page
from envloop.console.routing import ConsoleRoute
from envloop.core.status import TERMINAL
from envloop.services import jobs, samples
from envloop.services.samples import SampleQuery
from envloop.wire.samples import SAMPLE_STATUSES

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)
shared = APIRouter(prefix="/share/{token}", route_class=ConsoleRoute, include_in_schema=False)

SORT_LABELS = {
    "attempt": "profile, task, attempt",
    "reward": "reward, lowest first",
    "-reward": "reward, highest first",
    "duration": "duration, shortest first",
    "-duration": "duration, longest first",
    "tokens": "tokens, fewest first",
    "-tokens": "tokens, most first",
}
REWARD_LABELS = {"any": "any", "counted": "counted only", "none": "no counted reward"}
QUERY_FIELDS = ("q", "status", "profile", "reward", "min_reward", "max_reward", "sort", "limit", "offset")


def _query(request: Request) -> tuple[SampleQuery, str | None]:
    """The page's query from its address (blank fields left out), or why it is not one."""
    given = {k: v for k, v in request.query_params.items() if k in QUERY_FIELDS and v.strip()}
    try:
        return SampleQuery.model_validate(given), None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return SampleQuery(), f"{where}: {first['msg']}"


def samples_page(request: Request, viewer: Viewer, job_id: str) -> Response:
    viewer.check_job(job_id)
    job = jobs.get_job(viewer.ctx, job_id)
    query, problem = _query(request)
    found = samples.job_samples(viewer.ctx, job_id, query)
    keep = {k: v for k, v in query.model_dump(exclude_defaults=True).items() if k != "offset"}
    values: dict[str, Any] = {
        "job": job,
        "view": "samples",
        "live": job.status not in TERMINAL,
        "query": query,
        "problem": problem,
        "found": found,
        "keep": keep,
        "statuses": SAMPLE_STATUSES,
        "sorts": SORT_LABELS,
        "rewards": REWARD_LABELS,
    }
    return page(request, viewer, "samples.html", nav="jobs", **values)


SessionViewer = Annotated[Viewer, Depends(session_viewer)]
ShareViewer = Annotated[Viewer, Depends(share_viewer)]


@router.get("/jobs/{job_id}/samples", response_class=HTMLResponse)
def samples_session(request: Request, job_id: str, v: SessionViewer) -> Response:
    return samples_page(request, v, job_id)


@shared.get("/samples", response_class=HTMLResponse)
def samples_shared(request: Request, v: ShareViewer) -> Response:
    assert v.shared_job is not None
    return samples_page(request, v, v.shared_job)
