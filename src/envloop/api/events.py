"""Server-sent events: a job's (or a rollout's) status changes as they happen.

The feed itself is the service's `ProgressFeed`; this adapter polls it off the event loop and
writes each change as an SSE message (`event: job|trial`, JSON data), then `event: end` with the
final job once the job is terminal. A comment line every few seconds keeps proxies from closing an
idle stream.
"""

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from envloop.services.rollouts import ProgressFeed

POLL_SEC = 0.5
KEEPALIVE_SEC = 15.0

SSE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A stream of `job` and `trial` events, then `end` (data: the final job)",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
}


def _message(event: str, data: str) -> str:
    return f"event: {event}\ndata: {data}\n\n"


async def _stream(feed: ProgressFeed) -> AsyncIterator[str]:
    last_sent = time.monotonic()
    while True:
        events = await run_in_threadpool(feed.poll)
        for item in events:
            yield _message(item.event, item.model_dump_json())
        if events:
            last_sent = time.monotonic()
        if feed.finished:
            yield _message("end", feed.job.model_dump_json())
            return
        if time.monotonic() - last_sent > KEEPALIVE_SEC:
            yield ": keep-alive\n\n"
            last_sent = time.monotonic()
        await asyncio.sleep(POLL_SEC)


def event_stream(feed: ProgressFeed) -> StreamingResponse:
    """The feed must be built (job found and readable) before streaming starts, so errors are 4xx."""
    return StreamingResponse(
        _stream(feed),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
