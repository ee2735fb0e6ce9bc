"""Live updates of the jobs list: one server-sent event stream for the whole page.

A browser keeps few connections per server open, so the list does not open one stream per job:
this stream polls each unfinished job's `ProgressFeed` (the same feed as the API's
`/v1/jobs/ID/events`) and forwards its job-level changes as `event: job` with `{"id", "status"}`;
every few seconds it also looks for jobs submitted since the page was rendered that match the page's
filters, and announces each as `event: new` with its id and row URL, then follows it too. The page
renders every changed or new row from the server.
"""

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from envloop.api.events import KEEPALIVE_SEC
from envloop.console.access import Viewer, session_viewer
from envloop.console.routing import ConsoleRoute
from envloop.errors import UserError
from envloop.operations.kinds import FEED_POLL_SEC
from envloop.services import jobs
from envloop.services.rollouts import JobEvent, ProgressFeed

MAX_JOBS = 20
NEW_JOBS_POLL_SEC = 2.0

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)


def _message(event: str, data: dict[str, str]) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


class _NewJobs:
    """Jobs submitted after the page was rendered that match its filters, each announced once."""

    def __init__(self, v: Viewer, since: datetime | None, status: str | None, tags: dict[str, str]) -> None:
        self.v = v
        self.since = since
        self.status = status
        self.tags = tags
        self.seen: set[str] = set()
        self.next_poll = 0.0

    def poll(self) -> list[str]:
        if self.since is None or time.monotonic() < self.next_poll:
            return []
        self.next_poll = time.monotonic() + NEW_JOBS_POLL_SEC
        found = jobs.list_jobs(self.v.ctx, status=self.status, tags=self.tags, limit=MAX_JOBS)
        fresh = [j.id for j in found if j.created_at > self.since and j.id not in self.seen]
        self.seen.update(fresh)
        return list(reversed(fresh))  # oldest first, so each lands on top in order


async def _stream(v: Viewer, feeds: list[ProgressFeed], new_jobs: _NewJobs) -> AsyncIterator[str]:
    idle = 0.0
    while new_jobs.since is not None or not all(feed.finished for feed in feeds):
        sent = False
        for job_id in await run_in_threadpool(new_jobs.poll):
            yield _message("new", {"id": job_id, "row_url": v.job_url(job_id, "row")})
            feeds.append(ProgressFeed(v.ctx, job_id))
            sent = True
        for feed in feeds:
            if feed.finished:
                continue
            events = await run_in_threadpool(feed.poll)
            if any(isinstance(e, JobEvent) for e in events):
                yield _message("job", {"id": feed.job_id, "status": feed.job.status})
                sent = True
        idle = 0.0 if sent else idle + FEED_POLL_SEC
        if idle > KEEPALIVE_SEC:
            yield ": keep-alive\n\n"
            idle = 0.0
        await asyncio.sleep(FEED_POLL_SEC)
    yield _message("end", {})


@router.get("/events")
def jobs_events(
    v: Annotated[Viewer, Depends(session_viewer)],
    job: Annotated[list[str] | None, Query(max_length=MAX_JOBS)] = None,
    since: Annotated[datetime | None, Query(description="announce jobs created after this time")] = None,
    status: str = "",
    tag: str = "",
) -> StreamingResponse:
    """Job status changes of the listed jobs (at most 20); with `since`, also the jobs submitted
    after it that match `status` and `tag`, for as long as the page stays open."""
    key, sep, value = tag.partition("=")
    if tag and (not sep or not key):
        raise UserError(f"invalid tag filter {tag!r}: expected key=value")
    feeds = [ProgressFeed(v.ctx, job_id) for job_id in dict.fromkeys(job or [])]
    new_jobs = _NewJobs(v, since, status or None, {key: value} if tag else {})
    return StreamingResponse(
        _stream(v, feeds, new_jobs),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
