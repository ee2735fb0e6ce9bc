"""A dataset revision's page (`/datasets/NAME@N`): its tasks with their digests and the features
some environment cannot honour, and beside each task the latest health check's verdict
(`services.dataset_checks`), with a link to the check's job. A revision never checked says so and
how to check it. Every job page links its revision here; a share link reads its one job only, so
this page is the project's, never a share's."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import HTMLResponse

from envloop.console.access import Viewer, session_viewer
from envloop.console.render import page
from envloop.console.routing import ConsoleRoute
from envloop.errors import NotFoundError
from envloop.services import dataset_checks, datasets

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)
SessionViewer = Annotated[Viewer, Depends(session_viewer)]


@router.get("/datasets/{ref}", response_class=HTMLResponse)
def dataset_page(request: Request, ref: str, v: SessionViewer) -> Response:
    """The revision `ref` (NAME@N or NAME@latest) and its latest health check, task by task."""
    dataset = datasets.get_dataset(v.ctx, ref)
    try:
        health = dataset_checks.latest_dataset_check(v.ctx, dataset.ref)
    except NotFoundError:
        health = None
    verdicts = {task.task: task for task in health.tasks} if health is not None else {}
    return page(request, v, "dataset.html", nav="", dataset=dataset, health=health, verdicts=verdicts)
