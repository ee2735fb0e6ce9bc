"""A job's results by a field of its tasks' metadata (`category`, `difficulty`, `tags`, …): the
tasks are grouped by the field's value and each group gets the same metrics as the whole job
(`core.metrics`, from the job result's own attempt grid), so a group's score comes with its
coverage and interval. A list value (tags) puts the task in the group of each of its values; the
answer says so, since groups then overlap. Tasks that do not set the field form a group of their
own (value null), never dropped.
"""

import json
from typing import Any

from envloop.core.display import coverage_line
from envloop.core.metrics import AttemptSlot, MemberRow, ProfileMetrics, compute_metrics
from envloop.errors import UserError
from envloop.services.context import Context
from envloop.services.jobs import load_job
from envloop.services.results import job_result
from envloop.services.task_facts import task_labels
from envloop.wire.breakdown import Breakdown, BreakdownGroup, GroupMetrics

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = ["Breakdown", "BreakdownGroup", "GroupMetrics"]


def metadata_fields(ctx: Context, job_id: str) -> list[str]:
    """Every metadata field the job's tasks set, sorted: what a breakdown can group by."""
    with ctx.store.read() as session:
        job = load_job(session, ctx.project_id, job_id)
    return _fields(task_labels(ctx, job))


def _fields(labels: dict[str, dict[str, Any]]) -> list[str]:
    return sorted({name for found in labels.values() for name in found})


def job_breakdown(ctx: Context, job_id: str, by: str) -> Breakdown:
    with ctx.store.read() as session:
        job = load_job(session, ctx.project_id, job_id)
    labels = task_labels(ctx, job)
    fields = _fields(labels)
    if by not in fields:
        known = ", ".join(fields) if fields else "none: the tasks carry no metadata"
        raise UserError(f"no task of job {job.id} sets metadata field {by!r} (fields: {known})")
    groups: dict[str | None, list[str]] = {}
    multi = False
    for task in job.tasks:
        value = labels.get(task, {}).get(by)
        values = value if isinstance(value, list) else [value]
        multi = multi or isinstance(value, list)
        for item in dict.fromkeys(_text(v) for v in values) if values else [None]:
            groups.setdefault(item, []).append(task)
    result = job_result(ctx, job.id)
    ordered = sorted(groups, key=lambda v: (v is None, v or ""))
    return Breakdown(
        job_id=job.id,
        by=by,
        fields=fields,
        multi_valued=multi,
        groups=[
            BreakdownGroup(
                value=value,
                tasks=groups[value],
                profiles={
                    ref: _group_metrics(metrics, groups[value]) for ref, metrics in result.profiles.items()
                },
            )
            for value in ordered
        ],
    )


def _text(value: Any) -> str | None:
    """A metadata value as its group's name: text as it is, anything else as JSON (`true`, `3`)."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _group_metrics(metrics: ProfileMetrics, tasks: list[str]) -> GroupMetrics:
    chosen = set(tasks)
    rows = [row for row in metrics.members if row.task in chosen]
    grouped = compute_metrics([row.task for row in rows], metrics.k, _slots(rows))
    return GroupMetrics(
        score=grouped.score,
        stderr=grouped.stderr,
        ci95=grouped.ci95,
        pass_at_k=grouped.pass_at_k,
        pass_hat_k=grouped.pass_hat_k,
        score_counts=grouped.score_counts,
        coverage=coverage_line(grouped),
    )


def _slots(rows: list[MemberRow]) -> list[AttemptSlot]:
    """The attempt grid of the job result's member rows, as the metrics read it."""
    slots = []
    for row in rows:
        for attempt, value in enumerate(row.attempts, start=1):
            if isinstance(value, str):
                if value != "undispatched":
                    slots.append(AttemptSlot(row.task, attempt, value))
            else:
                slots.append(AttemptSlot(row.task, attempt, "scored", value))
    return slots
