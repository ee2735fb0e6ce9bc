"""A baseline against several candidates in one view: `/compare?a=A&b=B1&b=B2…`.

Each candidate is compared to the baseline exactly as `el job compare A B1 B2…` compares it (one
`services.compare.compare_runs` each): its tally and B - A with interval, then one row per task
with A's mean and each candidate's difference, the worst regression in any column first. A
candidate that did not measure what A measured is shown refused with the reason; the others stand.
"""

from dataclasses import dataclass

from fastapi import Request, Response

from envloop.console.access import Viewer
from envloop.console.render import page
from envloop.errors import UserError
from envloop.services import compare, jobs
from envloop.wire import Comparison

CANDIDATES = 9


@dataclass(frozen=True)
class Candidate:
    label: str
    """B1, B2, …: as `el job compare` names them."""
    job_id: str
    comparison: Comparison | None
    refused: str | None


@dataclass(frozen=True)
class ManyRow:
    task: str
    a: float | None
    """A's mean reward at the task, from the first comparison that scored it on both sides."""
    differences: list[float | None]
    """Each candidate's B - A at the task, None where it was not scored on both sides."""


def many_page(request: Request, v: Viewer, a: str, candidates: list[str], profile_a: str | None) -> Response:
    chosen = list(dict.fromkeys(candidates))
    if len(chosen) > CANDIDATES:
        raise UserError(f"compare at most {CANDIDATES} candidates with one baseline ({len(chosen)} given)")
    baseline = jobs.get_job(v.ctx, a)
    found = []
    for n, job_id in enumerate(chosen, start=1):
        job = jobs.get_job(v.ctx, job_id)
        try:
            result = compare.compare_runs(v.ctx, baseline.id, job.id, profile_a)
        except UserError as exc:
            found.append(Candidate(f"B{n}", job.id, None, str(exc)))
        else:
            found.append(Candidate(f"B{n}", job.id, result, None))
    return page(
        request,
        v,
        "compare_many.html",
        nav="jobs",
        job_a=baseline,
        candidates=found,
        rows=_rows(baseline.tasks, found),
    )


def _rows(tasks: list[str], candidates: list[Candidate]) -> list[ManyRow]:
    scored = [{t.task: t for t in c.comparison.tasks} if c.comparison is not None else {} for c in candidates]
    rows = []
    for task in tasks:
        pairs = [found.get(task) for found in scored]
        a = next((p.a for p in pairs if p is not None), None)
        rows.append(ManyRow(task, a, [p.difference if p is not None else None for p in pairs]))
    rows.sort(key=lambda r: min((d for d in r.differences if d is not None), default=0.0))
    return rows
