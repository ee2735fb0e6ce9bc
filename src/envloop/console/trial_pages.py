"""A trial's pages: Overview, Metrics, Logs, Artifacts (listed, previewed, downloaded) and Trace,
the step-by-step viewer, whose step list and steps are loaded a window at a time.

Every page exists for a session (`/trials/ID/…`) and under a share link (`/share/TOKEN/trials/ID/…`),
where only the shared job's trials can be read.
"""

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse

from envloop.console.access import Viewer, session_viewer, share_viewer
from envloop.console.render import SECURITY_HEADERS, fragment, page
from envloop.console.routing import ConsoleRoute
from envloop.console.trace_view import call_results, calling_step, grading_index, step_item, step_text
from envloop.core.trajectory import Step, ToolStep
from envloop.core.trial import PhaseRecord
from envloop.errors import NotFoundError, UserError
from envloop.services import trace, trial_files, trials
from envloop.services.trial_usage import trial_usage
from envloop.services.trials import LOG_FILES, TrialView
from envloop.store.artifacts import ArtifactNotFoundError
from envloop.trajectories.pages import Outline

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)
shared = APIRouter(prefix="/share/{token}", route_class=ConsoleRoute, include_in_schema=False)
SessionViewer = Annotated[Viewer, Depends(session_viewer)]
ShareViewer = Annotated[Viewer, Depends(share_viewer)]

TABS = (
    ("overview", "Overview"),
    ("metrics", "Metrics"),
    ("logs", "Logs"),
    ("artifacts", "Artifacts"),
    ("trace", "Trace"),
)
STEP_WINDOW = 200
WINDOW_BYTES = 8 * 1024 * 1024
"""The most step JSON read for one window of the timeline (a window has one step at least)."""
CLIP = 20_000
TEXT_CHUNK = 200_000
PREVIEW_BYTES = 64 * 1024
ARTIFACTS_SHOWN = 500
"""Kept files listed on one page of the Artifacts tab (a trial may keep 200,000)."""
FLAG_PATHS_SHOWN = 50


@dataclass(frozen=True)
class LogItem:
    label: str
    path: str
    window: trial_files.TextWindow | None


def readable_trial(viewer: Viewer, trial_id: str) -> TrialView:
    """The trial, if this viewer may read it (a share link: only its job's trials)."""
    trial = trials.get_trial(viewer.ctx, trial_id)
    if viewer.shared_job is not None and trial.job_id != viewer.shared_job:
        raise NotFoundError(f"unknown trial {trial_id!r}")
    return trial


def _tab(request: Request, viewer: Viewer, trial: TrialView, tab: str, **values: Any) -> Response:
    return page(request, viewer, f"trial_{tab}.html", nav="jobs", trial=trial, tab=tab, tabs=TABS, **values)


def overview(request: Request, viewer: Viewer, trial_id: str) -> Response:
    trial = readable_trial(viewer, trial_id)
    phases = [PhaseRecord.model_validate(p) for p in trial.phases]
    usage = trial_usage(viewer.ctx, trial_id)
    return _tab(request, viewer, trial, "overview", usage=usage, phases=phases, flag_paths=FLAG_PATHS_SHOWN)


def metrics(request: Request, viewer: Viewer, trial_id: str) -> Response:
    return _tab(request, viewer, readable_trial(viewer, trial_id), "metrics")


def logs(request: Request, viewer: Viewer, trial_id: str, file: str | None, offset: int) -> Response:
    trial = readable_trial(viewer, trial_id)
    known = {path for paths in LOG_FILES.values() for path in paths}
    if file is not None and file not in known:
        raise UserError(f"unknown log {file!r}")
    items = []
    for phase, paths in LOG_FILES.items():
        for path in paths:
            try:
                start = offset if path == file else 0
                window = trial_files.read_window(viewer.ctx, trial_id, path, start)
            except ArtifactNotFoundError:
                window = None
            items.append(LogItem(f"{phase} {path.rsplit('/', 1)[-1].removesuffix('.txt')}", path, window))
    return _tab(request, viewer, trial, "logs", logs=items, window=trial_files.WINDOW)


def artifacts(request: Request, viewer: Viewer, trial_id: str, preview: str | None, offset: int) -> Response:
    trial = readable_trial(viewer, trial_id)
    shown = None
    if preview:
        shown = trial_files.read_window(viewer.ctx, trial_id, preview, 0, PREVIEW_BYTES)
    page = trials.artifact_page(viewer.ctx, trial_id, offset, ARTIFACTS_SHOWN)
    previous = max(0, offset - ARTIFACTS_SHOWN) if offset else None
    return _tab(request, viewer, trial, "artifacts", page=page, previous_offset=previous, preview=shown)


def download(viewer: Viewer, trial_id: str, path: str) -> Response:
    """A kept file as an attachment of opaque type: the browser saves it, never renders it."""
    readable_trial(viewer, trial_id)
    file = viewer.ctx.artifacts.trial_file(trial_id, path)
    headers = {**SECURITY_HEADERS, "Content-Security-Policy": "sandbox; default-src 'none'"}
    return FileResponse(
        file, media_type="application/octet-stream", filename=path.rsplit("/", 1)[-1], headers=headers
    )


def _step_values(viewer: Viewer, trial: TrialView, outline: Outline, step: Step) -> dict[str, Any]:
    grading = grading_index(outline)
    return {
        "v": viewer,
        "trial": trial,
        "step": step,
        "clip": CLIP,
        "results": call_results(outline, step),
        "call_index": calling_step(outline, step) if isinstance(step, ToolStep) else None,
        "grading": step.index == (grading if grading is not None else outline.total - 1),
    }


def _outline(viewer: Viewer, trial_id: str) -> Outline | None:
    return trace.load_outline(viewer.ctx, trial_id, checked=True)


def trace_page(request: Request, viewer: Viewer, trial_id: str, selected: int) -> Response:
    trial = readable_trial(viewer, trial_id)
    outline = _outline(viewer, trial_id)
    if outline is None or not outline.total:
        return _tab(request, viewer, trial, "trace", trace=None)
    selected = min(max(0, selected), outline.total - 1)
    # The timeline starts at the first step (the viewer loads the rest in windows as it needs them).
    window = outline.steps(0, max(STEP_WINDOW, selected + 1), WINDOW_BYTES)
    end = len(window)
    step = window[selected] if selected < end else trace.trace_step(viewer.ctx, trial_id, selected)
    values = _step_values(viewer, trial, outline, step)
    return _tab(
        request,
        viewer,
        trial,
        "trace",
        trace=_TraceInfo.of(outline),
        items=[step_item(s) for s in window],
        next_offset=end if end < outline.total else None,
        selected=selected,
        grading_index=grading_index(outline),
        **{k: value for k, value in values.items() if k not in ("v", "trial")},
    )


@dataclass(frozen=True)
class _TraceInfo:
    total: int
    agent: str
    runner: str
    model: str | None
    stop_reason: str | None
    usage: Any

    @classmethod
    def of(cls, outline: Outline) -> "_TraceInfo":
        head = outline.head
        return cls(outline.total, head.agent, head.runner, head.model, head.stop_reason, head.usage)


def step_items(viewer: Viewer, trial_id: str, offset: int, limit: int) -> Response:
    readable_trial(viewer, trial_id)
    outline = _outline(viewer, trial_id)
    if outline is None:
        raise NotFoundError(f"trial {trial_id} kept no trajectory")
    steps = outline.steps(offset, limit, WINDOW_BYTES)
    end = offset + len(steps)
    return fragment(
        "_step_items.html",
        items=[step_item(s) for s in steps],
        selected=-1,
        next_offset=end if end < outline.total else None,
    )


def step_detail(viewer: Viewer, trial_id: str, index: int) -> Response:
    trial = readable_trial(viewer, trial_id)
    outline = _outline(viewer, trial_id)
    if outline is None:
        raise NotFoundError(f"trial {trial_id} kept no trajectory")
    step = trace.trace_step(viewer.ctx, trial_id, index)
    return fragment("_step.html", **_step_values(viewer, trial, outline, step))


def step_text_chunk(viewer: Viewer, trial_id: str, index: int, field: str, offset: int) -> Response:
    """More of one long text of a step, as plain text the viewer appends (never parsed as HTML)."""
    readable_trial(viewer, trial_id)
    text = step_text(trace.trace_step(viewer.ctx, trial_id, index), field)
    if text is None:
        raise NotFoundError(f"step {index} has no text {field!r}")
    chunk = text[offset : offset + TEXT_CHUNK]
    following = offset + len(chunk)
    headers = {**SECURITY_HEADERS, "X-Next-Offset": str(following) if following < len(text) else ""}
    return PlainTextResponse(chunk, headers=headers)


Offset = Annotated[int, Query(ge=0)]
Limit = Annotated[int, Query(ge=1, le=1000)]


def _register(target: APIRouter, viewer_dependency: Any) -> None:
    """The same trial routes for a session and for a share link."""
    ViewerDep = Annotated[Viewer, Depends(viewer_dependency)]

    @target.get("/trials/{trial_id}", response_class=HTMLResponse)
    def trial_overview(request: Request, trial_id: str, v: ViewerDep) -> Response:
        return overview(request, v, trial_id)

    @target.get("/trials/{trial_id}/metrics", response_class=HTMLResponse)
    def trial_metrics(request: Request, trial_id: str, v: ViewerDep) -> Response:
        return metrics(request, v, trial_id)

    @target.get("/trials/{trial_id}/logs", response_class=HTMLResponse)
    def trial_logs(
        request: Request, trial_id: str, v: ViewerDep, file: str | None = None, offset: Offset = 0
    ) -> Response:
        return logs(request, v, trial_id, file, offset)

    @target.get("/trials/{trial_id}/artifacts", response_class=HTMLResponse)
    def trial_artifacts(
        request: Request, trial_id: str, v: ViewerDep, preview: str | None = None, offset: Offset = 0
    ) -> Response:
        return artifacts(request, v, trial_id, preview, offset)

    @target.get("/trials/{trial_id}/artifacts/{path:path}")
    def trial_download(trial_id: str, path: str, v: ViewerDep) -> Response:
        return download(v, trial_id, path)

    @target.get("/trials/{trial_id}/trace", response_class=HTMLResponse)
    def trial_trace(request: Request, trial_id: str, v: ViewerDep, step: Offset = 0) -> Response:
        return trace_page(request, v, trial_id, step)

    @target.get("/trials/{trial_id}/trace/steps", response_class=HTMLResponse)
    def trial_step_items(
        trial_id: str, v: ViewerDep, offset: Offset = 0, limit: Limit = STEP_WINDOW
    ) -> Response:
        return step_items(v, trial_id, offset, limit)

    @target.get("/trials/{trial_id}/trace/step/{index}", response_class=HTMLResponse)
    def trial_step(trial_id: str, index: int, v: ViewerDep) -> Response:
        return step_detail(v, trial_id, index)

    @target.get("/trials/{trial_id}/trace/step/{index}/text")
    def trial_step_text(trial_id: str, index: int, field: str, v: ViewerDep, offset: Offset = 0) -> Response:
        return step_text_chunk(v, trial_id, index, field, offset)


_register(router, session_viewer)
_register(shared, share_viewer)
