"""envloop's one retry policy (`envloop.core.retry_policy`), as model calls and the worker's store
calls use it: what is retried, how often, how long it waits, and what is raised in the end."""

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy.exc import OperationalError

from envloop.core.retry_policy import RETRY_AFTER_CAP_SEC, Backoff, call_retrying_now, retrying
from envloop.models.retry import with_retries
from envloop.models.types import ModelError
from envloop.scheduling import store_calls
from envloop.store.db import is_lock_timeout


class Flaky:
    """Fails with each of `failures` in turn, then answers "ok"."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


def recorded_sleeps() -> tuple[list[float], Callable[[float], Awaitable[None]]]:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    return waits, sleep


def throttled(retry_after: float | None = None) -> ModelError:
    return ModelError("429 too many requests", kind="rate_limit", status=429, retry_after=retry_after)


def test_a_model_call_is_retried_with_the_wait_the_server_asked_for_capped() -> None:
    waits, sleep = recorded_sleeps()
    call = Flaky(throttled(3.0), throttled(86_400.0))
    result = asyncio.run(with_retries(call, max_retries=5, backoff=Backoff(), sleep=sleep))
    assert result == ("ok", 3)
    assert waits == [3.0, RETRY_AFTER_CAP_SEC]


def test_a_model_call_gives_up_after_its_retries_with_the_attempts_counted() -> None:
    waits, sleep = recorded_sleeps()
    call = Flaky(*(throttled() for _ in range(5)))
    with pytest.raises(ModelError) as raised:
        asyncio.run(with_retries(call, max_retries=2, backoff=Backoff(1.0, 30.0), sleep=sleep))
    assert (call.calls, raised.value.attempts) == (3, 3)
    assert len(waits) == 2 and 0 <= waits[0] <= 1.0 and 0 <= waits[1] <= 2.0


def test_a_request_that_cannot_succeed_is_not_tried_again() -> None:
    waits, sleep = recorded_sleeps()
    call = Flaky(ModelError("400 unexpected reasoning effort", kind="bad_request", status=400))
    with pytest.raises(ModelError) as raised:
        asyncio.run(with_retries(call, max_retries=5, backoff=Backoff(), sleep=sleep))
    assert (call.calls, raised.value.attempts, waits) == (1, 1, [])


def locked() -> OperationalError:
    return OperationalError("BEGIN IMMEDIATE", {}, sqlite3.OperationalError("database is locked"))


def test_a_store_call_is_retried_for_as_long_as_the_lock_is_held_and_says_so() -> None:
    waits, sleep = recorded_sleeps()
    said: list[float] = []
    call = Flaky(*(locked() for _ in range(12)))
    policy = retrying(
        worth_retrying=is_lock_timeout,
        backoff=store_calls.STORE_BACKOFF,
        max_retries=None,
        on_retry=lambda _, delay: said.append(delay),
        sleep=sleep,
    )
    assert asyncio.run(policy(call)) == "ok"
    assert call.calls == 13 and said == waits
    assert all(0 <= wait <= store_calls.STORE_BACKOFF.cap_sec for wait in waits)


def test_a_store_error_that_is_not_a_lock_timeout_is_raised_at_once() -> None:
    call = Flaky(OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: jobs")))
    policy = retrying(worth_retrying=is_lock_timeout, backoff=Backoff(), max_retries=None)
    with pytest.raises(OperationalError, match="no such table"):
        asyncio.run(policy(call))
    assert call.calls == 1


class FlakyNow:
    """`Flaky` for a plain call, each failing try taking `slow_sec`."""

    def __init__(self, *failures: BaseException, slow_sec: float = 0.0) -> None:
        self.failures = list(failures)
        self.slow_sec = slow_sec
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            time.sleep(self.slow_sec)
            raise self.failures.pop(0)
        return "ok"


def test_a_call_retried_only_after_its_first_failure_waits_and_counts_as_the_policy_says() -> None:
    waits: list[float] = []
    said: list[float] = []
    first_fails = FlakyNow(locked())
    assert (
        call_retrying_now(
            first_fails,
            worth_retrying=is_lock_timeout,
            backoff=Backoff(base_sec=0.01, cap_sec=0.01),
            on_retry=lambda _, delay: said.append(delay),
            sleep=waits.append,
        )
        == "ok"
    )
    assert first_fails.calls == 2 and said == waits and len(waits) == 1 and 0 <= waits[0] <= 0.01

    always_fails = FlakyNow(*(locked() for _ in range(5)))
    with pytest.raises(OperationalError, match="locked"):
        call_retrying_now(
            always_fails, worth_retrying=is_lock_timeout, backoff=Backoff(), max_retries=2, sleep=waits.append
        )
    assert always_fails.calls == 3, "the first try is one of the 1 + max_retries"

    never_retried = FlakyNow(OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: jobs")))
    with pytest.raises(OperationalError, match="no such table"):
        call_retrying_now(
            never_retried, worth_retrying=is_lock_timeout, backoff=Backoff(), sleep=waits.append
        )
    assert never_retried.calls == 1


def test_a_call_gives_up_counting_the_time_its_first_try_took() -> None:
    waits: list[float] = []
    slow = FlakyNow(locked(), slow_sec=0.3)
    with pytest.raises(OperationalError, match="locked"):
        call_retrying_now(
            slow,
            worth_retrying=is_lock_timeout,
            backoff=Backoff(base_sec=0.01, cap_sec=0.01),
            give_up_after_sec=0.3,
            sleep=waits.append,
        )
    assert slow.calls == 1 and waits == []
