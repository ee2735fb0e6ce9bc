"""Following a job to its end with a live bar on stderr, in parts: completed, failed, cancelled,
running, then what is still pending.

Following must cost little next to the job it follows, whatever its size: the bar reads only the
job's status and trial counts (one query embedded; against a server, the counts its event stream
already carries), never the job's result, which the caller builds once at the end. Embedded, the
wait between two looks is a tenth of the time followed so far (at least 50 ms, at most 2 s), so a
long job is looked at a number of times that grows with the logarithm of its length, not with its
length or size. Near its end the wait shrinks to half the time the job needs, at the pace its trials
have ended so far, to finish what is left: its end is seen within tens of milliseconds, not a tenth
of its length late, for a handful more looks. While no trial ends (a slow last trial), the wait
grows again with the time since one last did, up to the tenth.
"""

import time
from collections.abc import Iterator

from rich.progress import MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

from envloop.cli.backend import Operations, remote
from envloop.cli.output import err
from envloop.core.status import TERMINAL, TrialStatus
from envloop.wire import JobEvent, JobProgress

POLL_MIN_SEC = 0.05
POLL_MAX_SEC = 2.0
POLL_SHARE = 0.1
"""The wait between looks, as a share of the time followed so far: the end is seen at most 10 %
late."""


BAR_WIDTH = 40
PARTS = (
    (TrialStatus.COMPLETED, "green"),
    (TrialStatus.FAILED, "red"),
    (TrialStatus.CANCELLED, "bright_black"),
    (TrialStatus.RUNNING, "blue"),
)


def _describe(progress: JobProgress) -> str:
    counts = progress.counts
    ended = "".join(
        f" · {status} {counts[status]}"
        for status in (TrialStatus.FAILED, TrialStatus.CANCELLED)
        if counts[status]
    )
    running, pending = counts[TrialStatus.RUNNING], counts[TrialStatus.PENDING]
    return f"running {running} · pending {pending}{ended}"


class PartsBar(ProgressColumn):
    """A bar whose parts show how the trials ended, so 43 of 50 cancelled never reads as done."""

    def render(self, task: Task) -> Text:
        counts: dict[str, int] = task.fields.get("counts", {})
        total = sum(counts.values())
        bar = Text()
        used = 0
        for status, style in PARTS:
            cells = round(BAR_WIDTH * counts.get(status, 0) / total) if total else 0
            cells = min(cells, BAR_WIDTH - used)
            bar.append("━" * cells, style=style)
            used += cells
        bar.append("━" * (BAR_WIDTH - used), style="grey23")
        return bar


def pause_before_next_look(followed: float, ended: int, left: int, still: float) -> float:
    """Seconds to wait before looking at the job again, `followed` seconds after the first look,
    with `ended` trials ended and `left` still to end, none having ended for the last `still`
    seconds (0: some ended since the look before)."""
    pause = min(max(followed * POLL_SHARE, POLL_MIN_SEC), POLL_MAX_SEC)
    if not ended:
        return pause
    if still > 0:  # a pause in the pace (a slow last trial): wait longer the longer it lasts
        return min(pause, max(POLL_MIN_SEC, still))
    if left == 0:  # the last trials just ended: the job's own end is a moment away
        return POLL_MIN_SEC
    return min(pause, max(POLL_MIN_SEC, followed / ended * left / 2))


def _polled(ops: Operations, job_id: str) -> Iterator[JobProgress]:
    """The job's progress, looked at less often the longer it has been followed, and more often
    again as its last trials end."""
    start = time.monotonic()
    ended_before, last_move = 0, start
    while True:
        progress = ops.job_progress(job_id)
        yield progress
        now = time.monotonic()
        ended, left = progress.done, progress.total - progress.done
        if ended > ended_before:
            ended_before, last_move = ended, now
        time.sleep(pause_before_next_look(now - start, ended, left, still=now - last_move))


def _updates(ops: Operations, job_id: str) -> Iterator[JobProgress]:
    """Progress as it changes: over HTTP from the job's event stream (each job event carries the
    counts), then by polling if the stream ends before the job does (a dropped connection)."""
    client = remote()
    if client is not None:
        for event in client.watch_job(job_id):
            if isinstance(event, JobEvent):
                yield JobProgress.model_validate(event.job.model_dump())
    yield from _polled(ops, job_id)


def follow(ops: Operations, job_id: str) -> JobProgress:
    """Follow until the job is terminal; the bar lives on stderr so --json output stays clean."""
    with Progress(
        TextColumn("[bold]{task.fields[job]}"),
        PartsBar(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    ) as bar:
        task = None
        for progress in _updates(ops, job_id):
            if task is None:
                task = bar.add_task("", total=progress.total, job=job_id, counts={})
            counts = dict(progress.counts)
            bar.update(task, completed=progress.done, description=_describe(progress), counts=counts)
            if progress.status in TERMINAL:
                return progress
    raise AssertionError("unreachable: polling ends only with a terminal job")
