"""Following a job to its end with a live bar on stderr: done / running / pending and the score so far."""

import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from envloop.cli.output import err
from envloop.core.display import coverage_line
from envloop.services.context import Context
from envloop.services.jobs import JobView, get_job
from envloop.services.results import job_result

POLL_SEC = 0.2


def _describe(ctx: Context, job: JobView) -> str:
    counts = job.counts
    done = counts["completed"] + counts["failed"] + counts["cancelled"]
    first = next(iter(job_result(ctx, job.id).profiles.values()), None) if done else None
    score = coverage_line(first) if first is not None else "no score yet"
    return f"running {counts['running']} · pending {counts['pending']} · {score}"


def follow(ctx: Context, job_id: str) -> JobView:
    """Poll until the job is terminal; the bar lives on stderr so --json output stays clean."""
    job = get_job(ctx, job_id)
    total = sum(job.counts.values())
    with Progress(
        TextColumn("[bold]{task.fields[job]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    ) as bar:
        task = bar.add_task("", total=total, job=job.id)
        last_done = -1
        while True:
            done = total - job.counts["pending"] - job.counts["running"]
            if done != last_done or job.counts["running"]:
                bar.update(task, completed=done, description=_describe(ctx, job))
                last_done = done
            if job.status in ("completed", "failed", "cancelled"):
                return job
            time.sleep(POLL_SEC)
            job = get_job(ctx, job_id)
