"""A worker's store (and disk) calls, run in a thread and waited out when the store stays locked.

A wait for a lock that timed out changed nothing, so the same call is tried again, by envloop's one
retry policy, for as long as it takes; every other error is raised. On the event loop nothing waits
for a lock: a write lock held elsewhere delays only the call waiting for it, never the running
trials or the renewal of their leases.
"""

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.exc import OperationalError

from envloop.core.retry_policy import Backoff, retrying
from envloop.store.db import is_lock_timeout

log = logging.getLogger("envloop.worker")
_T = TypeVar("_T")
STORE_BACKOFF = Backoff(base_sec=0.05, cap_sec=2.0)
"""How a store call that gave up waiting for a lock is tried again: soon, and never more than 2 s apart."""


async def off_loop(what: str, call: Callable[..., _T], *args: Any) -> _T:
    """`call(*args)` in a thread, tried again while the store stays locked (`what` names it in the
    log). The policy is entered only once a first try has timed out: a few store calls per trial
    each paid for building and driving it while nearly all succeed at once."""

    def warn(_: BaseException, delay: float) -> None:
        log.warning("%s: the store stayed locked; trying again in %.2f s", what, delay)

    try:
        return await asyncio.to_thread(call, *args)
    except OperationalError as exc:
        if not is_lock_timeout(exc):
            raise
        delay = STORE_BACKOFF.delay(1, None)
        warn(exc, delay)
        await asyncio.sleep(delay)
    policy = retrying(
        worth_retrying=lambda exc: isinstance(exc, OperationalError) and is_lock_timeout(exc),
        backoff=STORE_BACKOFF,
        max_retries=None,
        on_retry=warn,
    )
    result: _T = await policy(asyncio.to_thread, call, *args)
    return result
