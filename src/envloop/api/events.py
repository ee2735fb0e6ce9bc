"""Server-sent events: a job's (or a rollout's) status changes as they happen.

The feed itself is what an events operation's service function returns (`envloop.operations.kinds.Feed`,
the service's `ProgressFeed`); this adapter polls it off the event loop and writes each change as
an SSE message (`event: job|trial`, JSON data), then `event: end` with the feed's outcome (the
final job) once it is finished. A comment line every few seconds keeps proxies from closing an
idle stream.
"""

import asyncio
import time
from collections.abc import AsyncIterator

from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from envloop.operations.kinds import FEED_POLL_SEC, Event, Feed

KEEPALIVE_SEC = 15.0


def _message(event: str, data: str) -> str:
    return f"event: {event}\ndata: {data}\n\n"


async def _stream(feed: Feed[Event]) -> AsyncIterator[str]:
    last_sent = time.monotonic()
    while True:
        events = await run_in_threadpool(feed.poll)
        for item in events:
            yield _message(item.event, item.model_dump_json())
        if events:
            last_sent = time.monotonic()
        if feed.finished:
            yield _message("end", feed.outcome.model_dump_json())
            return
        if time.monotonic() - last_sent > KEEPALIVE_SEC:
            yield ": keep-alive\n\n"
            last_sent = time.monotonic()
        await asyncio.sleep(FEED_POLL_SEC)


def event_stream(feed: Feed[Event]) -> StreamingResponse:
    """The feed must be built (job found and readable) before streaming starts, so errors are 4xx."""
    return StreamingResponse(
        _stream(feed),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
