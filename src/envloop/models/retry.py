"""Retrying model calls: which failures are worth another try, and how long to wait before it.

Rate limits (429), overload (529), server errors (5xx), request timeouts (408), conflicts (409) and
failures to connect or to get an answer in time are retried; every other status is the request's
own fault (400 "unexpected reasoning effort", 401, 404, ...) and fails at once, since sending the
same request again cannot change the answer. The wait is the server's `Retry-After` (or
`retry-after-ms`) when it gives one, else envloop's one retry policy (`envloop.core.retry_policy`:
the wait capped, exponential backoff with full jitter).
"""

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from envloop.core.retry_policy import RETRY_AFTER_CAP_SEC, Backoff, retrying
from envloop.models.types import ModelError, ModelErrorKind

__all__ = ["RETRY_AFTER_CAP_SEC", "Backoff", "kind_for_status", "retry_after_seconds", "with_retries"]

T = TypeVar("T")


def kind_for_status(status: int) -> ModelErrorKind:
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status in (408,):
        return "timeout"
    if status in (429, 529):
        return "rate_limit"
    if status == 409 or status >= 500:
        return "server"
    return "bad_request"


def retry_after_seconds(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """The wait a response asks for: `retry-after-ms`, else `Retry-After` (seconds or an HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    max_retries: int,
    backoff: Backoff,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> tuple[T, int]:
    """The call's result and how many attempts it took; a ModelError once retrying cannot help
    (envloop's one retry policy, `envloop.core.retry_policy`)."""
    attempts = 0

    async def attempt() -> T:
        nonlocal attempts
        attempts += 1
        try:
            return await call()
        except ModelError as exc:
            exc.attempts = attempts
            raise

    policy = retrying(
        worth_retrying=lambda exc: isinstance(exc, ModelError) and exc.retryable,
        backoff=backoff,
        max_retries=max_retries,
        retry_after=lambda exc: exc.retry_after if isinstance(exc, ModelError) else None,
        sleep=sleep,
    )
    result: T = await policy(attempt)
    return result, attempts
