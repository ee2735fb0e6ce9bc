"""Pages about jobs: the jobs list, a job's Metrics page, its task grid, its tool usage, its export,
and the project leaderboard.

Every number comes from a service (`jobs`, `results`, `failures`, `compare`, `task_grid`,
`tool_usage`, `leaderboard`, `distribution`); this module only gathers them for a template. A job's
pages exist twice: for a session (`/jobs/ID/…`) and for a share link (`/share/TOKEN/…`), whose
viewer reads that one job only.
"""

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import HTMLResponse, StreamingResponse

from envloop.api.events import event_stream
from envloop.console.access import Viewer, session_viewer, share_viewer
from envloop.console.charts import CurveChart, HistogramChart, curve_chart, histogram_chart
from envloop.console.render import SECURITY_HEADERS, fragment, page
from envloop.console.routing import ConsoleRoute
from envloop.core.metrics import null_reasons
from envloop.core.status import TERMINAL, JobStatus
from envloop.errors import UserError
from envloop.services import (
    breakdown,
    compare,
    dataset_checks,
    diagnosis,
    jobs,
    leaderboard,
    profiles,
    results,
    shares,
    task_grid,
    tool_usage,
    usage,
)
from envloop.services.compare import Comparison
from envloop.services.distribution import reward_histogram
from envloop.services.jobs import JobView
from envloop.services.results import JobResult, ProfileResult
from envloop.services.rollouts import ProgressFeed

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)
shared = APIRouter(prefix="/share/{token}", route_class=ConsoleRoute, include_in_schema=False)
SessionViewer = Annotated[Viewer, Depends(session_viewer)]
ShareViewer = Annotated[Viewer, Depends(share_viewer)]

GRID_PAGE = 100
GRID_SORT_LABELS = {
    "task": "task (dataset order)",
    "score": "score (weakest first)",
    "attempt_spread": "spread across attempts (most inconsistent first)",
    "profile_spread": "spread across profiles (most inconsistent first)",
}
STATUSES: tuple[str, ...] = tuple(JobStatus)


@dataclass(frozen=True)
class JobRow:
    job: JobView
    result: JobResult | None


@dataclass(frozen=True)
class ProfileBlock:
    ref: str
    metrics: ProfileResult
    reasons: dict[str, str]
    curve: CurveChart | None
    histogram: HistogramChart | None


@dataclass(frozen=True)
class PairedItem:
    a: str
    b: str
    comparison: Comparison | None
    error: str | None


def _row(viewer: Viewer, job: JobView) -> JobRow:
    return JobRow(job=job, result=results.job_result(viewer.ctx, job.id))


def _parse_tag(tag: str) -> dict[str, str]:
    key, sep, value = tag.partition("=")
    if not sep or not key:
        raise UserError(f"invalid tag filter {tag!r}: expected key=value")
    return {key: value}


@router.get("/", response_class=HTMLResponse)
def jobs_list(request: Request, v: SessionViewer, status: str = "", tag: str = "") -> Response:
    """The jobs list: newest first, filtered by status and tag, live while jobs run and as new ones
    are submitted."""
    problem = None
    rows: list[JobRow] = []
    # Taken before the query: a job submitted meanwhile is then announced live, never missed.
    rendered_at = datetime.now(UTC).isoformat()
    try:
        if status and status not in STATUSES:
            raise UserError(f"unknown status {status!r} (choose from: {', '.join(STATUSES)})")
        tags = _parse_tag(tag.strip()) if tag.strip() else {}
        rows = [_row(v, job) for job in jobs.list_jobs(v.ctx, status=status or None, tags=tags, limit=100)]
    except UserError as exc:
        problem = str(exc)
    return page(
        request,
        v,
        "jobs.html",
        nav="jobs",
        rows=rows,
        status=status,
        tag=tag,
        statuses=STATUSES,
        problem=problem,
        rendered_at=rendered_at,
    )


@router.get("/jobs/{job_id}/row", response_class=HTMLResponse)
def job_row(job_id: str, v: SessionViewer) -> Response:
    """One row of the jobs list, re-rendered when the live feed reports a change."""
    return fragment("_job_row.html", v=v, row=_row(v, jobs.get_job(v.ctx, job_id)))


def _comparisons(viewer: Viewer, job: JobView) -> list[PairedItem]:
    items = []
    first = job.profiles[0] if job.profiles else None
    for other in job.profiles[1:]:
        assert first is not None
        try:
            found = compare.compare_runs(viewer.ctx, job.id, None, first, other)
            items.append(PairedItem(first, other, found, None))
        except UserError as exc:
            items.append(PairedItem(first, other, None, str(exc)))
    return items


def job_page(request: Request, viewer: Viewer, job_id: str, by: str | None = None) -> Response:
    viewer.check_job(job_id)
    job = jobs.get_job(viewer.ctx, job_id)
    result = results.job_result(viewer.ctx, job_id)
    blocks = []
    for ref, metrics in result.profiles.items():
        histogram = reward_histogram(metrics)
        blocks.append(
            ProfileBlock(
                ref=ref,
                metrics=metrics,
                reasons=null_reasons(metrics),
                curve=curve_chart(metrics.curve) if metrics.curve else None,
                histogram=histogram_chart(histogram) if histogram.bars else None,
            )
        )
    found = diagnosis.job_diagnosis(viewer.ctx, job_id)
    values: dict[str, Any] = {
        "job": job,
        "blocks": blocks,
        "failures": found.failures,
        "diagnosis": found,
        "status_note": found.status_note,
        "usage": usage.job_usage(viewer.ctx, job_id),
        "comparisons": _comparisons(viewer, job),
        "shares": [] if viewer.read_only else shares.list_shares(viewer.ctx, job_id),
        "profile_params": {ref: profiles.get_profile(viewer.ctx, ref) for ref in job.profiles},
        "comparable": [] if viewer.read_only else compare.comparable_jobs(viewer.ctx, job_id),
        "health": dataset_checks.dataset_check(viewer.ctx, job_id)
        if dataset_checks.CHECK_TAG in job.tags
        else None,
        "view": "metrics",
        "live": job.status not in TERMINAL,
        "breakdown_url": viewer.job_url(job_id, "breakdown") + (f"?{urlencode({'by': by})}" if by else ""),
    }
    return page(request, viewer, "job.html", nav="jobs", **values)


def grid_page(request: Request, viewer: Viewer, job_id: str, sort: str, offset: int) -> Response:
    viewer.check_job(job_id)
    if sort not in GRID_SORT_LABELS:
        raise UserError(f"unknown sort {sort!r} (choose from: {', '.join(GRID_SORT_LABELS)})")
    job = jobs.get_job(viewer.ctx, job_id)
    grid = task_grid.task_grid(viewer.ctx, job_id, sort, max(0, offset), GRID_PAGE)  # type: ignore[arg-type]
    return page(
        request,
        viewer,
        "grid.html",
        nav="jobs",
        job=job,
        grid=grid,
        view="grid",
        live=job.status not in TERMINAL,
        sorts=list(GRID_SORT_LABELS.items()),
        page_size=GRID_PAGE,
        pages=(grid.total_tasks + GRID_PAGE - 1) // GRID_PAGE,
    )


def progress_fragment(viewer: Viewer, job_id: str) -> Response:
    """The job's progress bar and counts, re-rendered when its live feed reports a change."""
    viewer.check_job(job_id)
    return fragment("_progress.html", job=jobs.get_job(viewer.ctx, job_id))


PREFERRED_FIELDS = ("category", "difficulty", "tags")
"""What a breakdown groups by when the page names no field: the first of these the tasks set."""


def breakdown_fragment(viewer: Viewer, job_id: str, by: str | None) -> Response:
    """Scores per group of tasks sharing a metadata value (loaded after the page: the first look
    at a job reads its tasks' metadata from their frozen copies)."""
    viewer.check_job(job_id)
    job = jobs.get_job(viewer.ctx, job_id)
    fields = breakdown.metadata_fields(viewer.ctx, job_id)
    found = None
    if fields:
        chosen = by if by in fields else next((f for f in PREFERRED_FIELDS if f in fields), fields[0])
        found = breakdown.job_breakdown(viewer.ctx, job.id, chosen)
    return fragment("_breakdown.html", v=viewer, found=found)


def tools_fragment(viewer: Viewer, job_id: str) -> Response:
    viewer.check_job(job_id)
    return fragment("_tools.html", usage=tool_usage.tool_usage(viewer.ctx, job_id))


def export_file(viewer: Viewer, job_id: str) -> Response:
    viewer.check_job(job_id)
    body = jobs.export_job(viewer.ctx, job_id).model_dump_json(indent=2, exclude_none=True)
    headers = {**SECURITY_HEADERS, "Content-Disposition": f'attachment; filename="{job_id}.json"'}
    return Response(body + "\n", media_type="application/json", headers=headers)


def events(viewer: Viewer, job_id: str) -> StreamingResponse:
    viewer.check_job(job_id)
    return event_stream(ProgressFeed(viewer.ctx, job_id))


Offset = Annotated[int, Query(ge=0)]


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_session(request: Request, job_id: str, v: SessionViewer, by: str | None = None) -> Response:
    return job_page(request, v, job_id, by)


@router.get("/jobs/{job_id}/grid", response_class=HTMLResponse)
def grid_session(
    request: Request, job_id: str, v: SessionViewer, sort: str = "task", offset: Offset = 0
) -> Response:
    return grid_page(request, v, job_id, sort, offset)


@router.get("/jobs/{job_id}/progress", response_class=HTMLResponse)
def progress_session(job_id: str, v: SessionViewer) -> Response:
    return progress_fragment(v, job_id)


@router.get("/jobs/{job_id}/breakdown", response_class=HTMLResponse)
def breakdown_session(job_id: str, v: SessionViewer, by: str | None = None) -> Response:
    return breakdown_fragment(v, job_id, by)


@router.get("/jobs/{job_id}/tools", response_class=HTMLResponse)
def tools_session(job_id: str, v: SessionViewer) -> Response:
    return tools_fragment(v, job_id)


@router.get("/jobs/{job_id}/export")
def export_session(job_id: str, v: SessionViewer) -> Response:
    return export_file(v, job_id)


@router.get("/jobs/{job_id}/events")
def events_session(job_id: str, v: SessionViewer) -> StreamingResponse:
    return events(v, job_id)


@shared.get("", response_class=HTMLResponse)
def job_shared(request: Request, v: ShareViewer, by: str | None = None) -> Response:
    assert v.shared_job is not None
    return job_page(request, v, v.shared_job, by)


@shared.get("/grid", response_class=HTMLResponse)
def grid_shared(request: Request, v: ShareViewer, sort: str = "task", offset: Offset = 0) -> Response:
    assert v.shared_job is not None
    return grid_page(request, v, v.shared_job, sort, offset)


@shared.get("/progress", response_class=HTMLResponse)
def progress_shared(v: ShareViewer) -> Response:
    assert v.shared_job is not None
    return progress_fragment(v, v.shared_job)


@shared.get("/breakdown", response_class=HTMLResponse)
def breakdown_shared(v: ShareViewer, by: str | None = None) -> Response:
    assert v.shared_job is not None
    return breakdown_fragment(v, v.shared_job, by)


@shared.get("/tools", response_class=HTMLResponse)
def tools_shared(v: ShareViewer) -> Response:
    assert v.shared_job is not None
    return tools_fragment(v, v.shared_job)


@shared.get("/export")
def export_shared(v: ShareViewer) -> Response:
    assert v.shared_job is not None
    return export_file(v, v.shared_job)


@shared.get("/events")
def events_shared(v: ShareViewer) -> StreamingResponse:
    assert v.shared_job is not None
    return events(v, v.shared_job)


@router.get("/leaderboard", response_class=HTMLResponse)
def leaderboard_page(request: Request, v: SessionViewer) -> Response:
    """The project's boards, read-only, one table per dataset revision, rows in rank order."""
    boards: dict[str, list[leaderboard.BoardRow]] = {}
    for row in leaderboard.show_leaderboard(v.ctx):
        boards.setdefault(row.dataset, []).append(row)
    return page(request, v, "leaderboard.html", nav="leaderboard", boards=list(boards.items()))
