"""Retries, Retry-After, errors that fail at once, and the per-endpoint concurrency limit, against
the scripted endpoint (and a port nothing listens on)."""

import asyncio
import random
import threading
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from envloop.models import (
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    close_clients,
    model_client,
    model_settings,
)
from envloop.models.limits import EndpointGate
from envloop.models.retry import Backoff, retry_after_seconds
from envloop.testing import Received, Reply, ScriptedServer

PROTOCOLS = ["openai", "anthropic"]
REQUEST = ModelRequest(messages=[Message(role="user", content="2+2?")])


def settings_for(url_root: str, protocol: str, **params: str) -> ModelSettings:
    url = url_root + "/v1" if protocol == "openai" else url_root
    base = {"MODEL_PROTOCOL": protocol, "MODEL_BASE_URL": url, "MODEL_NAME": "m"}
    return model_settings({**base, **params})


def complete(settings: ModelSettings, calls: int = 1) -> list[ModelResponse | ModelError]:
    async def one() -> ModelResponse | ModelError:
        try:
            return await model_client(settings).complete(REQUEST)
        except ModelError as exc:
            return exc

    async def run() -> list[ModelResponse | ModelError]:
        try:
            return list(await asyncio.gather(*(one() for _ in range(calls))))
        finally:
            await close_clients()

    return asyncio.run(run())


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_rate_limits_and_server_errors_are_retried(protocol: str) -> None:
    script = [
        Reply(status=429, error="slow down", headers={"Retry-After": "0"}),
        Reply(status=503, error="warming up", headers={"Retry-After": "0"}),
        Reply(text="4"),
    ]
    with ScriptedServer(script) as server:
        [response] = complete(settings_for(server.root_url, protocol))
    assert isinstance(response, ModelResponse)
    assert (response.text, response.attempts) == ("4", 3)
    assert len(server.received) == 3


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_retry_after_is_honoured(protocol: str) -> None:
    script = [Reply(status=429, error="slow down", headers={"retry-after-ms": "400"}), Reply(text="4")]
    with ScriptedServer(script) as server:
        started = time.monotonic()
        [response] = complete(settings_for(server.root_url, protocol))
        elapsed = time.monotonic() - started
    assert isinstance(response, ModelResponse) and response.attempts == 2
    assert elapsed >= 0.4


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    ("status", "message"),
    [(400, "Unexpected reasoning effort 'high'"), (401, "invalid API key"), (404, "model m not found")],
)
def test_errors_a_retry_cannot_fix_fail_at_once_with_the_servers_message(
    protocol: str, status: int, message: str
) -> None:
    with ScriptedServer([Reply(status=status, error=message)], default=lambda r: Reply(text="4")) as server:
        [error] = complete(settings_for(server.root_url, protocol, REASONING_EFFORT="high"))
    assert isinstance(error, ModelError)
    assert len(server.received) == 1
    assert error.status == status and error.attempts == 1
    assert message in error.message
    assert error.message.startswith(f"HTTP {status} from {server.root_url}/v1")


def test_not_found_says_what_the_base_url_should_look_like() -> None:
    with ScriptedServer() as server:
        [error] = complete(settings_for(server.root_url + "/v1", "anthropic"))  # one /v1 too many
    assert isinstance(error, ModelError) and error.status == 404
    assert "for MODEL_PROTOCOL=anthropic, MODEL_BASE_URL is the root URL, without /v1" in error.message


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_unreachable_endpoint_fails_after_its_retries_with_a_clear_message(
    protocol: str, refused_port: int
) -> None:
    root = f"http://127.0.0.1:{refused_port}"
    [error] = complete(settings_for(root, protocol, MAX_RETRIES="1"))
    assert isinstance(error, ModelError)
    assert error.kind == "connection" and error.attempts == 2
    assert error.message.startswith(f"could not reach {root}/v1")
    assert error.message.endswith("(after 2 attempts)")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_dropped_connection_is_retried(protocol: str) -> None:
    with ScriptedServer([Reply(disconnect=True), Reply(text="4")]) as server:
        [response] = complete(settings_for(server.root_url, protocol))
    assert isinstance(response, ModelResponse) and response.attempts == 2


def test_a_request_that_takes_too_long_times_out_and_is_retried() -> None:
    with ScriptedServer([Reply(text="late", delay_sec=1.0), Reply(text="4")]) as server:
        [response] = complete(settings_for(server.root_url, "openai", REQUEST_TIMEOUT_SEC="0.3"))
    assert isinstance(response, ModelResponse)
    assert (response.text, response.attempts) == ("4", 2)


def test_retries_stop_at_max_retries() -> None:
    failing = [Reply(status=500, error="boom", headers={"Retry-After": "0"})] * 5
    with ScriptedServer(failing) as server:
        [error] = complete(settings_for(server.root_url, "openai", MAX_RETRIES="2"))
    assert isinstance(error, ModelError)
    assert len(server.received) == 3
    assert error.message == f"HTTP 500 from {server.root_url}/v1/chat/completions: boom (after 3 attempts)"


def test_calls_to_one_endpoint_respect_max_concurrency() -> None:
    lock = threading.Lock()
    in_flight, peak = [0], [0]

    def slow(received: Received) -> Reply:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.1)
        with lock:
            in_flight[0] -= 1
        return Reply(text="4")

    with ScriptedServer(default=slow) as server:
        results = complete(settings_for(server.root_url, "openai", MAX_CONCURRENCY="2"), calls=6)
    assert all(isinstance(r, ModelResponse) for r in results)
    assert peak[0] == 2


def test_retry_after_reads_seconds_milliseconds_and_http_dates() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert retry_after_seconds({"Retry-After": "7"}) == 7.0
    assert retry_after_seconds({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert retry_after_seconds({"Retry-After": later}, now=now) == 30.0
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_backoff_is_jittered_exponential_and_a_retry_after_is_capped() -> None:
    backoff, rng = Backoff(base_sec=1.0, cap_sec=30.0), random.Random(7)
    for retry, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (10, 30.0)]:
        delays = [backoff.delay(retry, None, rng) for _ in range(200)]
        assert min(delays) >= 0 and max(delays) <= ceiling
        assert max(delays) > ceiling / 2
    assert backoff.delay(1, 5.0) == 5.0
    assert backoff.delay(1, 86_400.0) == 120.0


def test_the_gate_hands_slots_over_in_order_and_forgets_cancelled_waiters() -> None:
    async def scenario() -> list[str]:
        gate, order, go = EndpointGate(), [], asyncio.Event()

        async def call(name: str, limit: int) -> None:
            async with gate.slot(limit):
                order.append(name)
                await go.wait()

        first = asyncio.create_task(call("a", 1))
        await asyncio.sleep(0)
        waiting = [asyncio.create_task(call(name, 1)) for name in "bcd"]
        await asyncio.sleep(0)
        waiting[0].cancel()
        await asyncio.sleep(0)
        assert (order, gate.in_flight) == (["a"], 1)
        go.set()
        await asyncio.gather(first, *waiting[1:])
        assert gate.in_flight == 0
        return order

    assert asyncio.run(scenario()) == ["a", "c", "d"]


def test_profiles_sharing_an_endpoint_keep_their_own_ceilings() -> None:
    async def scenario() -> tuple[list[str], int]:
        gate, order, go = EndpointGate(), [], asyncio.Event()

        async def call(name: str, limit: int) -> None:
            async with gate.slot(limit):
                order.append(name)
                await go.wait()

        tasks = [asyncio.create_task(call("strict-1", 1)), asyncio.create_task(call("strict-2", 1))]
        tasks += [asyncio.create_task(call(f"loose-{i}", 3)) for i in (1, 2, 3)]
        await asyncio.sleep(0)
        running = gate.in_flight
        go.set()
        await asyncio.gather(*tasks)
        return order, running

    order, running = asyncio.run(scenario())
    assert running == 3  # strict-1, loose-1, loose-2: the strict profile's second call waits
    assert order[:3] == ["strict-1", "loose-1", "loose-2"]
    assert sorted(order) == ["loose-1", "loose-2", "loose-3", "strict-1", "strict-2"]
