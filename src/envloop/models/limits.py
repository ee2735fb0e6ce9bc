"""A per-endpoint limit on model calls in flight, shared by every trial of one worker.

A call starts only when fewer than its profile's `MAX_CONCURRENCY` calls to the same endpoint are
in flight, so two profiles on one endpoint keep their own ceilings while sharing the count. Waiting
calls queue in arrival order and a finishing call hands its slot straight to the first one that may
take it: no crowd of waiters wakes up to find the slot gone. The slot is held for one HTTP request
only, never across a retry's wait, so a throttled call does not keep others from the endpoint.
Gates belong to an event loop (asyncio futures cannot cross loops) and go away with it.
"""

import asyncio
import weakref
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class EndpointGate:
    def __init__(self) -> None:
        self.in_flight = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    @asynccontextmanager
    async def slot(self, limit: int) -> AsyncIterator[None]:
        await self._acquire(limit)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, limit: int) -> None:
        # Every queued call's limit is reached (a release hands slots over at once), so a call that
        # finds room under its own limit takes it without overtaking anyone who could have used it.
        if self.in_flight < limit:
            self.in_flight += 1
            return
        entry = (limit, asyncio.get_running_loop().create_future())
        self._waiting.append(entry)
        try:
            await entry[1]
        except asyncio.CancelledError:
            if entry[1].done() and not entry[1].cancelled():
                self._release()  # the slot was handed over just as the call was cancelled
            elif entry in self._waiting:
                self._waiting.remove(entry)
            raise

    def _release(self) -> None:
        self.in_flight -= 1
        for entry in list(self._waiting):
            limit, future = entry
            if self.in_flight >= limit:
                continue
            self._waiting.remove(entry)
            if not future.done():
                self.in_flight += 1
                future.set_result(None)


_GATES: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, EndpointGate]]" = (
    weakref.WeakKeyDictionary()
)


def endpoint_gate(endpoint: str) -> EndpointGate:
    gates = _GATES.setdefault(asyncio.get_running_loop(), {})
    gate = gates.get(endpoint)
    if gate is None:
        gate = gates[endpoint] = EndpointGate()
    return gate
