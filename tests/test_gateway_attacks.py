"""The model gateway as a hostile agent meets it: tokens that are wrong, closed or another trial's;
request targets that try to reach another upstream path; bodies too large; headers meant to travel
upstream; upstreams that echo the key, fail, hang, redirect or break off mid-stream; upstreams on
private addresses. The real key must never reach the agent, and every failure of the model must be
the protocol's error for the agent and a failed model step for the trial."""

import json
import socket
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import anthropic
import httpx
import openai
import pytest

from envloop.gateway import Upstream, UpstreamRefused
from envloop.testing import Reply, ScriptedServer
from tests.gateway_support import GatewayThread, RawUpstream, running_gateway, sse_head

KEY = "sk-upstream-real-key-7f3a9c"
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def gateway() -> Iterator[GatewayThread]:
    with running_gateway(allow_private_upstream=True, read_timeout_sec=1.5) as running:
        yield running


def raw_request(host: str, port: int, data: bytes) -> tuple[int, bytes]:
    """Send bytes as they are (no client normalises the target) and read the status and body."""
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
            if b"\r\n\r\n" in received:
                head, _, body = received.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    None,
                )
                if length is not None and len(body) >= length:
                    break
    status = int(received.split(b" ", 2)[1])
    return status, received.partition(b"\r\n\r\n")[2]


def test_a_missing_wrong_or_closed_token_is_401_in_each_protocols_shape_and_nothing_goes_upstream(
    gateway: GatewayThread,
) -> None:
    with ScriptedServer(default=lambda r: Reply(text="never")) as upstream:
        session = gateway.open(Upstream(protocol="openai", base_url=upstream.openai_url, api_key=KEY))
        closed = gateway.open(Upstream(protocol="openai", base_url=upstream.openai_url, api_key=KEY))
        gateway.call(closed.close)
        for token in (None, "elgw-guessed", KEY, closed.token, session.token + "x"):
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            refused = httpx.post(f"{session.base_url}/chat/completions", json=CHAT, headers=headers)
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
            assert refused.json() == {
                "error": {
                    "message": "missing, unknown or revoked gateway token",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": None,
                }
            }
        with pytest.raises(anthropic.AuthenticationError) as denied:
            anthropic.Anthropic(
                base_url=session.anthropic_base_url, api_key="elgw-guessed", max_retries=0
            ).messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        assert denied.value.body == {
            "type": "error",
            "error": {"type": "authentication_error", "message": "missing, unknown or revoked gateway token"},
        }
        assert upstream.received == []


@pytest.mark.parametrize(
    ("target", "status"),
    [
        (b"POST /v1/../v1/chat/completions", 404),
        (b"POST /v1/chat/completions/../../admin", 404),
        (b"POST /v1/%63hat/completions", 404),
        (b"POST //v1/chat/completions", 404),
        (b"POST /v1/chat/completions/", 404),
        (b"POST /v1/chat%2Fcompletions", 404),
        (b"POST http://169.254.169.254/v1/chat/completions", 400),
        (b"POST http://127.0.0.1:1/v1/chat/completions", 400),
        (b"GET /v1/chat/completions", 405),
        (b"POST /v2/anything", 404),
        (b"POST /admin", 404),
    ],
)
def test_a_request_target_other_than_a_protocol_route_never_reaches_the_upstream(
    gateway: GatewayThread, target: bytes, status: int
) -> None:
    with ScriptedServer(default=lambda r: Reply(text="never")) as upstream:
        session = gateway.open(Upstream(protocol="openai", base_url=upstream.openai_url, api_key=KEY))
        body = json.dumps(CHAT).encode()
        request = (
            target
            + b" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + session.token.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\nConnection: close\r\n\r\n"
            + body
        )
        got, answer = raw_request(gateway.gateway.host, gateway.gateway.port, request)
        assert got == status
        assert list(json.loads(answer)) == ["error"]
        assert upstream.received == []


def test_the_other_protocols_routes_are_404_for_a_session(gateway: GatewayThread) -> None:
    with ScriptedServer(default=lambda r: Reply(text="never")) as upstream:
        session = gateway.open(Upstream(protocol="anthropic", base_url=upstream.anthropic_url, api_key=KEY))
        refused = httpx.post(
            f"{session.openai_base_url}/chat/completions", json=CHAT, headers={"x-api-key": session.token}
        )
        assert refused.status_code == 404
        assert "speaks the Anthropic Messages protocol" in refused.json()["error"]["message"]
        assert upstream.received == []


def test_a_body_over_the_limit_is_413_before_anything_goes_upstream() -> None:
    with (
        ScriptedServer(default=lambda r: Reply(text="never")) as upstream,
        running_gateway(allow_private_upstream=True, max_body_bytes=64 * 1024) as gateway,
    ):
        session = gateway.open(Upstream(protocol="anthropic", base_url=upstream.anthropic_url, api_key=KEY))
        big = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x" * 70_000}]}
        declared = httpx.post(
            f"{session.base_url}/v1/messages", json=big, headers={"x-api-key": session.token}
        )
        chunked = httpx.post(
            f"{session.base_url}/v1/messages",
            content=iter([json.dumps(big).encode()[i : i + 8192] for i in range(0, 80_000, 8192)]),
            headers={"x-api-key": session.token, "content-type": "application/json"},
        )
        for refused in (declared, chunked):
            assert refused.status_code == 413
            assert refused.json()["error"]["type"] == "request_too_large"
        assert upstream.received == []


def test_the_agents_own_credentials_and_headers_never_travel_upstream(gateway: GatewayThread) -> None:
    with ScriptedServer(default=lambda r: Reply(text="ok"), api_key=KEY) as upstream:
        session = gateway.open(Upstream(protocol="openai", base_url=upstream.openai_url, api_key=KEY))
        forged = httpx.post(
            f"{session.base_url}/chat/completions",
            json=CHAT,
            headers={
                "x-api-key": session.token,  # the gateway token, sent the Anthropic way
                "Authorization": "Bearer sk-forged-by-the-agent",
                "Cookie": "session=stolen",
                "OpenAI-Organization": "org-agent",
                "X-Forwarded-For": "10.0.0.1",
                "Proxy-Authorization": "Basic Zm9vOmJhcg==",
                "anthropic-beta": "agent-beta",
            },
        )
        assert forged.status_code == 200
        [received] = upstream.received
        assert received.headers["authorization"] == f"Bearer {KEY}"
        allowed = {"host", "content-type", "content-length", "accept", "accept-encoding", "user-agent"}
        assert set(received.headers) - allowed == {"authorization", "anthropic-beta"}


ECHO = f"Incorrect API key provided: {KEY}. You can find your API key at https://example.invalid"


def echo_everywhere(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    """An upstream that puts the key in an allowlisted header, a 200 body and a stream event."""
    request = json.loads(body)
    if request.get("stream"):
        sse_head(handler)
        chunk = {
            "id": KEY,
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": ECHO}, "finish_reason": None}],
        }
        data = f"data: {json.dumps(chunk)}\n\n".encode()
        for i in range(0, len(data), 7):  # the key cut across many writes
            handler.wfile.write(data[i : i + 7])
            handler.wfile.flush()
            time.sleep(0.001)
        handler.wfile.write(b"data: [DONE]\n\n")
        return
    completion = {
        "id": "c",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": ECHO}, "finish_reason": "stop"}],
    }
    payload = json.dumps(completion).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("x-request-id", f"req-{KEY}")
    handler.send_header("x-echo", KEY)
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


def test_the_real_key_never_reaches_the_agent_in_headers_bodies_streams_or_errors(
    gateway: GatewayThread,
) -> None:
    with RawUpstream(echo_everywhere) as upstream:
        session = gateway.open(Upstream(protocol="openai", base_url=upstream.url + "/v1", api_key=KEY))
        headers = {"Authorization": f"Bearer {session.token}"}
        whole = httpx.post(f"{session.base_url}/chat/completions", json=CHAT, headers=headers)
        with httpx.stream(
            "POST", f"{session.base_url}/chat/completions", json={**CHAT, "stream": True}, headers=headers
        ) as streamed:
            stream_bytes = b"".join(streamed.iter_raw())
        seen = [whole.content, stream_bytes, json.dumps(dict(whole.headers)).encode()]
        assert all(KEY.encode() not in part for part in seen)
        assert "x-echo" not in whole.headers and whole.headers["x-request-id"] == "req-[masked]"
        assert whole.json()["choices"][0]["message"]["content"].startswith(
            "Incorrect API key provided: [masked]."
        )
        steps = gateway.call(session.steps)
        assert all(KEY not in step.model_dump_json() for step in steps) and len(steps) == 2


def test_an_upstream_error_that_echoes_the_key_is_the_protocols_error_without_it(
    gateway: GatewayThread,
) -> None:
    script = [Reply(status=401, error=ECHO), Reply(status=529, error=f"overloaded ({KEY})")]
    with ScriptedServer(script) as upstream:
        openai_session = gateway.open(Upstream(protocol="openai", base_url=upstream.openai_url, api_key=KEY))
        with pytest.raises(openai.AuthenticationError) as refused:
            openai.OpenAI(
                base_url=openai_session.base_url, api_key=openai_session.token, max_retries=0
            ).chat.completions.create(**CHAT)
        assert KEY not in str(refused.value) and "[masked]" in refused.value.message
        anthropic_session = gateway.open(
            Upstream(protocol="anthropic", base_url=upstream.anthropic_url, api_key=KEY)
        )
        with pytest.raises(anthropic.APIStatusError) as overloaded:
            anthropic.Anthropic(
                base_url=anthropic_session.base_url, api_key=anthropic_session.token, max_retries=0
            ).messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        assert overloaded.value.status_code == 529 and KEY not in str(overloaded.value.body)
        [failed] = gateway.call(openai_session.steps)
        assert failed.http_status == 401 and failed.error is not None and "[masked]" in failed.error
        [overload] = gateway.call(anthropic_session.steps)
        assert overload.http_status == 529 and overload.error is not None and KEY not in overload.error


HALF = {
    "id": "c",
    "model": "m",
    "choices": [{"index": 0, "delta": {"content": "half an"}, "finish_reason": None}],
}


def stream_cut_short(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    """A stream delimited by the connection's close, closed before its last event."""
    sse_head(handler)
    handler.wfile.write(f"data: {json.dumps(HALF)}\n\n".encode())
    handler.wfile.flush()
    handler.connection.shutdown(socket.SHUT_RDWR)


def chunked_stream_cut_short(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    """A chunked stream whose connection drops in the middle of a chunk."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    event = f"data: {json.dumps(HALF)}\n\n".encode()
    handler.wfile.write(f"{len(event) + 100:x}\r\n".encode() + event)
    handler.wfile.flush()
    handler.connection.shutdown(socket.SHUT_RDWR)


def silent(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    time.sleep(4)


def redirect(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    handler.send_response(307)
    handler.send_header("Location", "http://169.254.169.254/latest/meta-data/")
    handler.send_header("Content-Length", "0")
    handler.end_headers()


def html_error(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    page = b"<html><body>502 Bad Gateway</body></html>"
    handler.send_response(502)
    handler.send_header("Content-Type", "text/html")
    handler.send_header("Content-Length", str(len(page)))
    handler.end_headers()
    handler.wfile.write(page)


@pytest.mark.parametrize(
    ("answer", "stream", "status", "said", "recorded"),
    [
        (stream_cut_short, True, 200, "the model endpoint's answer broke off", "ended before its last event"),
        (
            chunked_stream_cut_short,
            True,
            200,
            "the model endpoint's answer broke off",
            "broke off (ClientPayloadError",
        ),
        (silent, False, 504, "the model endpoint did not answer in time", "no answer from"),
        (redirect, False, 502, "the model endpoint answered HTTP 307, a redirect", "HTTP 307"),
        (html_error, False, 502, "the model endpoint: <html><body>502 Bad Gateway</body></html>", "HTTP 502"),
    ],
)
def test_an_upstream_failure_is_the_protocols_error_for_the_agent_and_a_failed_step(
    gateway: GatewayThread, answer: object, stream: bool, status: int, said: str, recorded: str
) -> None:
    with RawUpstream(answer) as upstream:
        session = gateway.open(Upstream(protocol="openai", base_url=upstream.url + "/v1", api_key=KEY))
        sdk = openai.OpenAI(base_url=session.base_url, api_key=session.token, max_retries=0, timeout=30)
        with pytest.raises(openai.APIError) as failed:
            if stream:
                list(sdk.chat.completions.create(**CHAT, stream=True))
            else:
                sdk.chat.completions.create(**CHAT)
        assert said in failed.value.message and upstream.url not in failed.value.message
        if not stream:
            assert isinstance(failed.value, openai.APIStatusError) and failed.value.status_code == status
        [step] = gateway.call(session.steps)
        assert step.error is not None and recorded in step.error and step.http_status == status
        assert len(upstream.requests) == 1  # the redirect was not followed


def test_an_upstream_that_refuses_connections_is_a_502_and_a_failed_step(
    gateway: GatewayThread, refused_port: int
) -> None:
    port = refused_port
    session = gateway.open(Upstream(protocol="anthropic", base_url=f"http://127.0.0.1:{port}", api_key=KEY))
    with pytest.raises(anthropic.APIStatusError) as failed:
        anthropic.Anthropic(base_url=session.base_url, api_key=session.token, max_retries=0).messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
    assert failed.value.status_code == 502 and str(port) not in str(failed.value.body)
    [step] = gateway.call(session.steps)
    assert step.error is not None and step.error.startswith(
        f"could not reach http://127.0.0.1:{port}/v1/messages"
    )


@pytest.mark.parametrize(
    "base_url",
    [
        "http://127.0.0.1:8431/v1",
        "http://[::1]:8431/v1",
        "http://169.254.169.254/v1",
        "http://10.1.2.3/v1",
        "http://192.168.0.5/v1",
        "http://100.64.0.1/v1",
        "http://[::ffff:127.0.0.1]/v1",
        "http://0.0.0.0:5432/v1",
    ],
)
def test_a_private_upstream_address_is_refused_unless_the_gateway_allows_it(base_url: str) -> None:
    with (
        running_gateway() as strict,
        pytest.raises(UpstreamRefused, match="this gateway allows only public upstreams"),
    ):
        strict.open(Upstream(protocol="openai", base_url=base_url, api_key=KEY))


def test_a_name_that_resolves_to_a_private_address_is_refused_when_it_is_resolved() -> None:
    with ScriptedServer(default=lambda r: Reply(text="never")) as upstream, running_gateway() as strict:
        session = strict.open(
            Upstream(protocol="openai", base_url=f"http://localhost:{upstream.port}/v1", api_key=KEY)
        )
        sdk = openai.OpenAI(base_url=session.base_url, api_key=session.token, max_retries=0)
        with pytest.raises(openai.APIStatusError) as refused:
            sdk.chat.completions.create(**CHAT)
        assert refused.value.status_code == 502
        [step] = strict.call(session.steps)
        assert (
            step.error is not None and "a loopback address; only public upstreams are allowed" in step.error
        )
        assert upstream.received == []
    with (
        ScriptedServer(default=lambda r: Reply(text="reached")) as upstream,
        running_gateway(allow_private_upstream=True) as lenient,
    ):
        session = lenient.open(Upstream(protocol="openai", base_url=f"http://localhost:{upstream.port}/v1"))
        sdk = openai.OpenAI(base_url=session.base_url, api_key=session.token, max_retries=0)
        assert sdk.chat.completions.create(**CHAT).choices[0].message.content == "reached"


@pytest.mark.parametrize(
    ("base_url", "message"),
    [
        (f"http://user:{KEY}@api.example.com/v1", "credentials in it"),
        ("http://api.example.com/v1?key=x", "query or fragment"),
        ("file:///etc/passwd", "not an http:// or https:// URL"),
    ],
)
def test_an_upstream_url_that_could_carry_more_than_an_address_is_refused(
    base_url: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message) as refused:
        Upstream(protocol="openai", base_url=base_url, api_key=KEY)
    assert KEY not in str(refused.value)


def test_a_key_that_could_inject_headers_upstream_is_refused_without_being_shown() -> None:
    with pytest.raises(ValueError, match="a character a header cannot carry") as refused:
        Upstream(protocol="openai", base_url="https://api.example.com/v1", api_key=f"{KEY}\r\nX-Evil: 1")
    assert KEY not in str(refused.value)
