"""The compare page: is job B better than job A, on which tasks, and how sure is that?

`/compare?a=JOB_A&b=JOB_B` (with `profile_a` / `profile_b` when a job ran several profiles, and
`a == b` for two profiles of one job). The header and the paired difference come from
`services.compare` (one paired t test, one unit), exactly as `el job compare` and the API give them;
below, every task of the two jobs with both means, their coverage, the difference and the attempts
as links to their trials, filtered and paged here; each task opens A's and B's attempts side by
side, each with the reason it did not pass and links to its trial and trace. Two jobs that did
not measure the same thing are refused with the reason. The jobs list reaches this page by
selecting two jobs (`?job=X&job=Y`, the older one becomes A), a job page by choosing another job of
its dataset revision.
"""

from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from envloop.console.access import Viewer, session_viewer
from envloop.console.charts import OverlayChart, rewards_overlay
from envloop.console.compare_many import many_page
from envloop.console.narrowing import Narrowing
from envloop.console.render import SECURITY_HEADERS, page
from envloop.console.routing import ConsoleRoute
from envloop.errors import UserError
from envloop.services import compare, jobs
from envloop.services.compare_groups import (
    CompareGroup,
    compared_labels,
    group_tasks,
    label_fields,
    matching_tasks,
)
from envloop.services.compare_outputs import attempt_outputs
from envloop.services.jobs import JobView
from envloop.services.task_grid import GridCell, task_cells
from envloop.wire import Comparison
from envloop.wire.compare import Side, TaskAttempts

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)
SessionViewer = Annotated[Viewer, Depends(session_viewer)]

PAGE = 100
Kind = Literal["improved", "regressed", "unchanged", "only_a", "only_b", "unscored"]
SHOWS: dict[str, str] = {
    "all": "every task",
    "improved": "improved (B higher)",
    "regressed": "regressed (B lower)",
    "unchanged": "unchanged",
    "one_side": "scored on one side only",
}
SORTS: dict[str, str] = {
    "task": "task (dataset order)",
    "regressed": "largest regression first",
    "improved": "largest improvement first",
}


@dataclass(frozen=True)
class TaskRow:
    task: str
    kind: Kind
    a: GridCell | None
    b: GridCell | None
    difference: float | None
    why: TaskAttempts | None
    """Each side's attempts with the reason each did not pass, shown side by side on request."""


def _kinds(comparison: Comparison, tasks: list[str]) -> dict[str, tuple[Kind, float | None]]:
    found: dict[str, tuple[Kind, float | None]] = dict.fromkeys(tasks, ("unscored", None))
    for pair in comparison.tasks:
        kind: Kind = (
            "improved" if pair.difference > 0 else "regressed" if pair.difference < 0 else "unchanged"
        )
        found[pair.task] = (kind, pair.difference)
    for excluded in comparison.excluded:
        found[excluded.task] = ("only_a" if excluded.reason == "only A scored it" else "only_b", None)
    return found


def _rows(
    viewer: Viewer,
    comparison: Comparison,
    job_a: JobView,
    job_b: JobView,
    tasks: list[str],
    show: str,
    sort: str,
    offset: int,
) -> tuple[list[TaskRow], int]:
    kinds = _kinds(comparison, tasks)
    wanted = {
        "all": None,
        "improved": {"improved"},
        "regressed": {"regressed"},
        "unchanged": {"unchanged"},
        "one_side": {"only_a", "only_b"},
    }[show]
    chosen = [t for t in tasks if wanted is None or kinds[t][0] in wanted]
    if sort != "task":
        sign = 1 if sort == "regressed" else -1
        chosen.sort(key=lambda t: (kinds[t][1] is None, sign * (kinds[t][1] or 0.0)))
    shown = chosen[offset : offset + PAGE]
    cells_a = task_cells(viewer.ctx, job_a.id, shown)
    cells_b = cells_a if job_b.id == job_a.id else task_cells(viewer.ctx, job_b.id, shown)
    attempts = {row.task: row for row in comparison.attempts}
    rows = [
        TaskRow(
            task=t,
            kind=kinds[t][0],
            a=cells_a.get((t, comparison.a.profile)),
            b=cells_b.get((t, comparison.b.profile)),
            difference=kinds[t][1],
            why=attempts.get(t),
        )
        for t in shown
    ]
    return rows, len(chosen)


def _chooser_needed(job_a: JobView, job_b: JobView, profile_a: str | None, profile_b: str | None) -> bool:
    """A job of several profiles needs its side's profile named, except two profiles of one job,
    which compare first against second by default."""
    if job_a.id == job_b.id:
        return (profile_a is None or profile_b is None) and not (
            profile_a is None and profile_b is None and len(job_a.profiles) == 2
        )
    return (profile_a is None and len(job_a.profiles) > 1) or (profile_b is None and len(job_b.profiles) > 1)


@router.get("/compare", response_class=HTMLResponse)
def compare_page(
    request: Request,
    v: SessionViewer,
    a: str | None = None,
    b: Annotated[list[str] | None, Query(max_length=10)] = None,
    job: Annotated[list[str] | None, Query(max_length=10)] = None,
    profile_a: str | None = None,
    profile_b: str | None = None,
    show: str = "all",
    sort: str = "task",
    offset: Annotated[int, Query(ge=0)] = 0,
    q: Annotated[str, Query(max_length=200)] = "",
    field: Annotated[str, Query(max_length=200)] = "",
    value: Annotated[str, Query(max_length=200)] = "",
    group: Annotated[str, Query(max_length=200)] = "",
) -> Response:
    """Job B against job A, task by task."""
    if job is not None:
        return _from_selection(v, job)
    if not a or not b:
        raise UserError("choose two jobs to compare: /compare?a=JOB_A&b=JOB_B")
    if len(set(b)) > 1:
        return many_page(request, v, a, b, profile_a, Narrowing(q, field, value, group))
    if show not in SHOWS:
        raise UserError(f"unknown filter {show!r} (choose from: {', '.join(SHOWS)})")
    if sort not in SORTS:
        raise UserError(f"unknown sort {sort!r} (choose from: {', '.join(SORTS)})")
    job_a, job_b = jobs.get_job(v.ctx, a), jobs.get_job(v.ctx, b[0])
    values: dict[str, Any] = {
        "job_a": job_a,
        "job_b": job_b,
        "profile_a": profile_a,
        "profile_b": profile_b,
        "comparison": None,
        "refused": None,
        "chooser": _chooser_needed(job_a, job_b, profile_a, profile_b),
        "shows": SHOWS,
        "sorts": SORTS,
        "show": show,
        "sort": sort,
    }
    if values["chooser"]:
        return page(request, v, "compare.html", nav="jobs", **values)
    try:
        comparison = compare.compare_runs(v.ctx, job_a.id, job_b.id, profile_a, profile_b)
    except UserError as exc:
        values["refused"] = str(exc)
        return page(request, v, "compare.html", 400, nav="jobs", **values)
    labels = compared_labels(v.ctx, [job_a.id, job_b.id])
    narrowing = Narrowing(q, field, value, group)
    narrowing.check(labels)
    tasks = matching_tasks(list(dict.fromkeys([*job_a.tasks, *job_b.tasks])), labels, q, field, value)
    rows, matching = _rows(v, comparison, job_a, job_b, tasks, show, sort, offset)
    groups: list[CompareGroup] = group_tasks(comparison, tasks, labels, group) if group else []
    shown_trials = [o.trial_id for r in rows if r.why for o in r.why.a + r.why.b if o.trial_id]
    values.update(
        outputs=attempt_outputs(v.ctx, [job_a.id, job_b.id], shown_trials),
        overlay=_overlay(comparison),
        narrowing=narrowing,
        fields=label_fields(labels),
        groups=groups,
        comparison=comparison,
        rows=rows,
        matching=matching,
        offset=offset,
        page_size=PAGE,
        here=_query(comparison.a, comparison.b),
        swapped=_query(comparison.b, comparison.a),
    )
    return page(request, v, "compare.html", nav="jobs", **values)


def _overlay(comparison: Comparison) -> OverlayChart | None:
    """A's and B's counted rewards over every task, binned on one axis."""
    a = [o.reward for row in comparison.attempts for o in row.a if o.reward is not None]
    b = [o.reward for row in comparison.attempts for o in row.b if o.reward is not None]
    return rewards_overlay({"A": a, "B": b})


def _query(a: Side, b: Side) -> str:
    return urlencode({"a": a.job_id, "b": b.job_id, "profile_a": a.profile, "profile_b": b.profile})


def _from_selection(viewer: Viewer, selected: list[str]) -> Response:
    """Jobs ticked in the jobs list: the oldest is A (the baseline), each newer one a candidate."""
    chosen = list(dict.fromkeys(selected))
    if len(chosen) < 2:
        raise UserError(f"select two or more jobs to compare ({len(chosen)} selected)")
    first, *others = sorted((jobs.get_job(viewer.ctx, j) for j in chosen), key=lambda j: (j.created_at, j.id))
    target = "/compare?" + urlencode([("a", first.id), *(("b", o.id) for o in others)])
    return RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)
