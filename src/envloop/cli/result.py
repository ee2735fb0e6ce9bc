"""`el job result`: a job's metrics with their coverage, why attempts are missing, what the trials
used and cost, and optionally its scores by a metadata field of its tasks."""

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Group
from rich.text import Text

from envloop.cli.backend import operations
from envloop.cli.diagnosis_view import diagnosis_view
from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, out
from envloop.cli.render import breakdown_view, result_view, usage_lines

if TYPE_CHECKING:
    from envloop.wire import JobDiagnosis, JobResult, JobUsage


def result(
    job_id: str,
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            help="Also break the scores down by this metadata field of the tasks (JSONL metadata, "
            "task.toml [metadata]: category, difficulty, tags, …).",
        ),
    ] = None,
    json_: JsonOpt = False,
) -> None:
    """Coverage first, then pass@k / pass^k, then the per-task table; then why attempts are missing,
    how the trials were isolated and the warnings they carry."""
    ops = operations()
    res = ops.job_result(job_id)
    found = ops.job_diagnosis(job_id)
    used = ops.job_usage(job_id)
    grouped = ops.job_breakdown(job_id, by) if by is not None else None
    if json_:
        document = {
            **res.model_dump(mode="json", by_alias=True),
            "diagnosis": found.model_dump(mode="json"),
            "usage": used.model_dump(mode="json"),
        }
        if grouped is not None:
            document["breakdown"] = grouped.model_dump(mode="json")
        emit_json(document)
        return
    print_result(res, found, used)
    if grouped is not None:
        out.print(breakdown_view(grouped))


def print_result(res: "JobResult", found: "JobDiagnosis", used: "JobUsage") -> None:
    """What `el job result` and `el job submit --wait` print of a job: its metrics, its usage, why
    attempts are missing and the warnings its trials carry."""
    out.print(result_view(res))
    out.print(Group(Text(""), Text("Usage", style="bold"), *usage_lines(used)))
    extra = diagnosis_view(found)
    if extra is not None:
        out.print(extra)
