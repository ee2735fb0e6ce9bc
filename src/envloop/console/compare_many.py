"""A baseline against several candidates in one view: `/compare?a=A&b=B1&b=B2…`.

Each candidate is compared to the baseline exactly as `el job compare A B1 B2…` compares it (one
`services.compare.compare_runs` each): its tally and B - A with interval, then one row per task
with A's mean and each candidate's difference, the worst regression in any column first. A
candidate that did not measure what A measured is shown refused with the reason; the others stand.

As on the two-run page, the tasks can be searched by name, filtered by a metadata field and
grouped by one (each group with every candidate's tally and mean B - A over its tasks), and every
run's rewards are drawn as histograms overlaid on one axis.
"""

from dataclasses import dataclass

from fastapi import Request, Response

from envloop.console.access import Viewer
from envloop.console.charts import OverlayChart, rewards_overlay
from envloop.console.narrowing import Narrowing
from envloop.console.render import page
from envloop.errors import UserError
from envloop.services import compare, jobs
from envloop.services.compare_groups import (
    CompareGroup,
    Labels,
    compared_labels,
    group_tasks,
    label_fields,
    matching_tasks,
)
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


@dataclass(frozen=True)
class ManyGroup:
    """One value of the grouping field: its task count and each candidate's figures over them."""

    value: str | None
    tasks: int
    candidates: list[CompareGroup | None]
    """Each candidate's tally and B - A in this group; None for a refused candidate."""


def many_page(
    request: Request, v: Viewer, a: str, candidates: list[str], profile_a: str | None, narrowing: Narrowing
) -> Response:
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
    labels = compared_labels(v.ctx, [baseline.id, *(c.job_id for c in found)])
    narrowing.check(labels)
    tasks = matching_tasks(baseline.tasks, labels, narrowing.search, narrowing.field, narrowing.value)
    return page(
        request,
        v,
        "compare_many.html",
        nav="jobs",
        job_a=baseline,
        candidates=found,
        rows=_rows(tasks, found),
        narrowing=narrowing,
        fields=label_fields(labels),
        groups=_groups(tasks, found, labels, narrowing.group) if narrowing.group else [],
        overlay=_overlay(found),
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


def _groups(tasks: list[str], candidates: list[Candidate], labels: Labels, by: str) -> list[ManyGroup]:
    """The tasks grouped by `by` (`services.compare_groups`), with each candidate's figures; the
    groups themselves depend on the tasks alone, so any compared candidate's list gives them."""
    each = [
        {g.value: g for g in group_tasks(c.comparison, tasks, labels, by)} if c.comparison else None
        for c in candidates
    ]
    shape = next((found for found in each if found is not None), {})
    return [
        ManyGroup(value, g.tasks, [found.get(value) if found is not None else None for found in each])
        for value, g in shape.items()
    ]


def _overlay(candidates: list[Candidate]) -> OverlayChart | None:
    """A's counted rewards and each compared candidate's, over every task, on one axis."""
    compared = [(c.label, c.comparison) for c in candidates if c.comparison is not None]
    if not compared:
        return None
    baseline = compared[0][1]
    rewards = {"A": [o.reward for row in baseline.attempts for o in row.a if o.reward is not None]}
    for label, comparison in compared:
        rewards[label] = [o.reward for row in comparison.attempts for o in row.b if o.reward is not None]
    return rewards_overlay(rewards)
