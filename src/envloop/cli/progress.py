"""Following a job to its end with a live bar on stderr: done / running / pending and the score so far.

Embedded, the bar polls the store; against a server it wakes on the job's server-sent events.
"""

import time
from collections.abc import Iterator

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from envloop.cli.backend import Operations, remote
from envloop.cli.output import err
from envloop.core.display import coverage_line, format_score
from envloop.wire import JobView

POLL_SEC = 0.2
TERMINAL = ("completed", "failed", "cancelled")


def _describe(ops: Operations, job: JobView) -> str:
    counts = job.counts
    done = counts["completed"] + counts["failed"] + counts["cancelled"]
    first = next(iter(ops.job_result(job.id).profiles.values()), None) if done else None
    score = coverage_line(first) if first is not None else "no score yet"
    if first is not None and first.ci95 is not None:
        score += f" (95% CI {format_score(first.ci95[0])}–{format_score(first.ci95[1])})"
    return f"running {counts['running']} · pending {counts['pending']} · {score}"


def _ticks(job_id: str) -> Iterator[None]:
    """When to look again: at most every POLL_SEC, and over HTTP only when something changed."""
    client = remote()
    if client is not None:
        last = 0.0
        for _ in client.watch_job(job_id):
            if time.monotonic() - last >= POLL_SEC:
                last = time.monotonic()
                yield
    while True:  # the event stream ended (the job did) or there is none: poll
        yield
        time.sleep(POLL_SEC)


def follow(ops: Operations, job_id: str) -> JobView:
    """Follow until the job is terminal; the bar lives on stderr so --json output stays clean."""
    job = ops.get_job(job_id)
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
        for _ in _ticks(job_id):
            job = ops.get_job(job_id)
            done = total - job.counts["pending"] - job.counts["running"]
            if done != last_done or job.counts["running"]:
                bar.update(task, completed=done, description=_describe(ops, job))
                last_done = done
            if job.status in TERMINAL:
                break
    return job
