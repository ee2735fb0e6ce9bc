"""The one way envloop tries something again: a model call that the provider throttled or failed
for a moment, a store call that gave up waiting for a lock, SQLite's write lock held by another
process, a PostgreSQL transaction aborted for a deadlock.

Which failures are worth another try is the caller's (a model error that is retryable, a lock
timeout); how long to wait is this policy's. The wait is what the failure asks for when it says
(a server's `Retry-After`), capped at RETRY_AFTER_CAP_SEC so a confused server cannot park a trial
for hours; otherwise exponential backoff with full jitter, so that many trials or workers held up
together do not come back in lockstep. The retrying itself is tenacity's: `retrying` for async
code, `retrying_now` for code that may block its thread (the store's synchronous writes); both
take the same policy. `call_retrying_now` runs a call under `retrying_now`'s policy but builds it
only after a first failure worth retrying, for the store's hot writes that almost never fail.
"""

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_any,
    stop_before_delay,
    stop_never,
)
from tenacity.stop import stop_base

RETRY_AFTER_CAP_SEC = 120.0
_T = TypeVar("_T")


@dataclass(frozen=True)
class Backoff:
    base_sec: float = 1.0
    cap_sec: float = 30.0

    def delay(self, retry: int, retry_after: float | None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number `retry` (1-based)."""
        if retry_after is not None:
            return min(retry_after, RETRY_AFTER_CAP_SEC)
        ceiling = min(self.cap_sec, self.base_sec * 2 ** (retry - 1))
        return (rng or random).uniform(0, ceiling)


def _no_wait_asked(_: BaseException) -> float | None:
    return None


def retrying(
    *,
    worth_retrying: Callable[[BaseException], bool],
    backoff: Backoff,
    max_retries: int | None,
    retry_after: Callable[[BaseException], float | None] = _no_wait_asked,
    on_retry: Callable[[BaseException, float], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncRetrying:
    """Call the result with an async function and its arguments: it is tried again while it fails
    with an error `worth_retrying` (at most `max_retries` times, None for as long as it takes),
    waiting as `backoff` says; any other error, or the last one, is raised as it was."""
    policy = _policy(worth_retrying, backoff, max_retries, None, retry_after, on_retry)
    return AsyncRetrying(sleep=sleep, **policy)


def retrying_now(
    *,
    worth_retrying: Callable[[BaseException], bool],
    backoff: Backoff,
    max_retries: int | None = None,
    give_up_after_sec: float | None = None,
    on_retry: Callable[[BaseException, float], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Retrying:
    """`retrying` for a plain function, sleeping in its thread; it also gives up before a wait that
    would end more than `give_up_after_sec` after the first try began."""
    policy = _policy(worth_retrying, backoff, max_retries, give_up_after_sec, _no_wait_asked, on_retry)
    return Retrying(sleep=sleep, **policy)


def call_retrying_now(
    work: Callable[[], _T],
    *,
    worth_retrying: Callable[[BaseException], bool],
    backoff: Backoff,
    max_retries: int | None = None,
    give_up_after_sec: float | None = None,
    on_retry: Callable[[BaseException, float], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> _T:
    """`work()` under `retrying_now`'s policy, which is built only once a first try failed with an
    error worth retrying: tenacity costs ~20 µs a call, a good part of a queue write that almost
    never fails. That failed try counts as the policy's first attempt, and `give_up_after_sec`
    still runs from when it began, so the waits, the retries and the last error are the policy's."""
    started = time.monotonic()
    try:
        return work()
    except Exception as exc:
        if not worth_retrying(exc):
            raise
        first_failure = exc
    if give_up_after_sec is not None:
        give_up_after_sec -= time.monotonic() - started
    policy = retrying_now(
        worth_retrying=worth_retrying,
        backoff=backoff,
        max_retries=max_retries,
        give_up_after_sec=give_up_after_sec,
        on_retry=on_retry,
        sleep=sleep,
    )
    failed_already = [first_failure]

    def tried_again() -> _T:
        if failed_already:
            raise failed_already.pop()
        return work()

    result: _T = policy(tried_again)
    return result


def _policy(
    worth_retrying: Callable[[BaseException], bool],
    backoff: Backoff,
    max_retries: int | None,
    give_up_after_sec: float | None,
    retry_after: Callable[[BaseException], float | None],
    on_retry: Callable[[BaseException, float], None] | None,
) -> dict[str, Any]:
    def wait(state: RetryCallState) -> float:
        failure = _failure(state)
        return backoff.delay(state.attempt_number, retry_after(failure))

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None:
            on_retry(_failure(state), state.upcoming_sleep)

    stop: stop_base = stop_never if max_retries is None else stop_after_attempt(max_retries + 1)
    if give_up_after_sec is not None:
        stop = stop_any(stop, stop_before_delay(give_up_after_sec))
    return {
        "retry": retry_if_exception(worth_retrying),
        "stop": stop,
        "wait": wait,
        "before_sleep": before_sleep,
        "reraise": True,
    }


def _failure(state: RetryCallState) -> BaseException:
    outcome = state.outcome
    failure = outcome.exception() if outcome is not None else None
    if not isinstance(failure, BaseException):
        raise RuntimeError("a retry was asked for without a failure")
    return failure
