"""Live updates of the jobs list: one server-sent event stream for the unfinished jobs on the page.

A browser keeps few connections per server open, so the list does not open one stream per job:
this stream polls each job's `ProgressFeed` (the same feed as the API's `/v1/jobs/ID/events`) and
forwards its job-level changes as `event: job` with `{"id", "status"}`, then `event: end` once
every job has finished. The page then re-renders the changed rows from the server.
"""

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from envloop.api.events import KEEPALIVE_SEC, POLL_SEC
from envloop.console.access import Viewer, session_viewer
from envloop.console.routing import ConsoleRoute
from envloop.services.rollouts import JobEvent, ProgressFeed

MAX_JOBS = 20

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)


def _message(event: str, data: dict[str, str]) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


async def _stream(feeds: list[ProgressFeed]) -> AsyncIterator[str]:
    idle = 0.0
    while not all(feed.finished for feed in feeds):
        sent = False
        for feed in feeds:
            if feed.finished:
                continue
            events = await run_in_threadpool(feed.poll)
            if any(isinstance(e, JobEvent) for e in events):
                yield _message("job", {"id": feed.job_id, "status": feed.job.status})
                sent = True
        idle = 0.0 if sent else idle + POLL_SEC
        if idle > KEEPALIVE_SEC:
            yield ": keep-alive\n\n"
            idle = 0.0
        await asyncio.sleep(POLL_SEC)
    yield _message("end", {})


@router.get("/events")
def jobs_events(
    v: Annotated[Viewer, Depends(session_viewer)],
    job: Annotated[list[str] | None, Query(max_length=MAX_JOBS)] = None,
) -> StreamingResponse:
    """Job status changes of the listed jobs (at most 20), until all have finished."""
    feeds = [ProgressFeed(v.ctx, job_id) for job_id in dict.fromkeys(job or [])]
    return StreamingResponse(
        _stream(feeds),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
