"""One authenticated call, from the agent's request to the upstream and back, recorded on the way.

What goes upstream: the route's own path, the body (sent as the upstream's model when it names
one; a streamed Chat Completions request asks for its usage chunk), an allowlist of headers and the
real key as the protocol wants it (`Authorization: Bearer` for OpenAI, `x-api-key` for Anthropic).
Nothing else of the agent's request is forwarded: its own credentials, cookies, forwarding or
proxy headers never leave the gateway. Redirects are not followed.

What comes back: the status, an allowlist of headers (content type, request ids, rate limits,
Retry-After) and the body, masked of the real key: a stream event by event as it arrives, a
whole body as it streams through. A failure upstream (no connection, a timeout, an error status)
reaches the agent as the protocol's own error (the upstream's, when it sent one) and becomes a
failed model step; what the agent reads names no upstream address, the step does.
"""

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from envloop.gateway.recording import Recorder, capped, recorder_for, request_summary
from envloop.gateway.routes import Route
from envloop.gateway.session import Call, GatewaySession
from envloop.gateway.to_agent import EventSplitter, Masker, error_event, error_json, parse_event
from envloop.models.base import server_message, transport_error
from envloop.models.protocol_errors import ErrorProtocol
from envloop.models.types import ModelError, ModelResponse
from envloop.trajectories.model_steps import model_step

_REQUEST_HEADERS = (
    "content-type",
    "accept",
    "user-agent",
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
)
_RESPONSE_HEADERS = ("content-type", "retry-after", "retry-after-ms", "request-id", "x-request-id")
_RESPONSE_HEADER_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
_ERROR_BODY_LIMIT = 1024 * 1024
_ANTHROPIC_VERSION = "2023-06-01"


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int
    max_event_bytes: int
    max_recorded_chars: int


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _AgentGone(Exception):
    """The agent closed its connection before the answer ended."""


class _Refused(Exception):
    """An upstream answer the gateway does not pass on (a redirect)."""


class BrokeOff(Exception):
    """A stream whose connection closed before the protocol's last event."""


async def read_body(request: web.BaseRequest, limit: int) -> dict[str, Any]:
    """The request's JSON object, read no further than `limit` bytes (413 beyond)."""
    too_large = BadRequest(413, f"the request body is larger than {limit // (1024 * 1024)} MiB")
    if request.content_length is not None and request.content_length > limit:
        raise too_large
    raw = bytearray()
    async for chunk in request.content.iter_any():
        raw += chunk
        if len(raw) > limit:
            raise too_large
    try:
        body = json.loads(raw)
    except ValueError:
        raise BadRequest(400, "the request body is not JSON") from None
    if not isinstance(body, dict):
        raise BadRequest(400, "the request body must be a JSON object")
    if not isinstance(body.get("model", ""), str):
        raise BadRequest(400, "model: must be a string")
    return body


def _upstream_headers(request: web.BaseRequest, session: GatewaySession) -> dict[str, str]:
    headers = {
        name: ", ".join(request.headers.getall(name)) for name in _REQUEST_HEADERS if name in request.headers
    }
    headers.setdefault("content-type", "application/json")
    headers["accept-encoding"] = "identity"
    upstream = session.upstream
    if upstream.protocol == "anthropic":
        headers.setdefault("anthropic-version", _ANTHROPIC_VERSION)
    if upstream.api_key is not None:
        key = upstream.api_key.get_secret_value()
        if upstream.protocol == "anthropic":
            headers["x-api-key"] = key
        else:
            headers["authorization"] = f"Bearer {key}"
    return headers


def _agent_headers(upstream: aiohttp.ClientResponse, masker: Masker) -> dict[str, str]:
    return {
        name: masker.mask_text(value)
        for name, value in upstream.headers.items()
        if name.lower() in _RESPONSE_HEADERS or name.lower().startswith(_RESPONSE_HEADER_PREFIXES)
    }


def _usage_only(data: Any) -> bool:
    """The extra chunk a Chat Completions stream ends with when usage is asked for."""
    return isinstance(data, dict) and data.get("choices") == [] and data.get("usage") is not None


def model_list(model: str) -> web.Response:
    """A model list holding the upstream's model alone, in the fields both SDKs read."""
    entry = {
        "id": model,
        "object": "model",
        "type": "model",
        "display_name": model,
        "created": 0,
        "created_at": "1970-01-01T00:00:00Z",
        "owned_by": "envloop",
    }
    body = {"object": "list", "data": [entry], "has_more": False, "first_id": model, "last_id": model}
    return web.json_response(body)


@dataclass
class Exchange:
    """One request forwarded and its answer relayed; `call` is set for the calls recorded as model
    steps (generations), None for the model list and token counts."""

    client: aiohttp.ClientSession
    limits: Limits
    session: GatewaySession
    route: Route
    request: web.BaseRequest
    url: str
    data: bytes | None
    call: Call | None = None
    requested_model: str | None = None
    added_usage: bool = False
    agent_protocol: ErrorProtocol | None = None
    """The protocol the agent speaks when the gateway translates (Gemini's), else the upstream's."""

    def __post_init__(self) -> None:
        key = self.session.upstream.api_key
        self.masker = Masker(key.get_secret_value() if key is not None else None)
        self.recorder: Recorder | None = (
            recorder_for(self.route, self.limits.max_recorded_chars) if self.call is not None else None
        )
        self.response: web.StreamResponse | None = None
        self.skipped = False  # an event too long to read passed through unrecorded

    async def run(self) -> web.StreamResponse:
        method = self.route.method
        headers = _upstream_headers(self.request, self.session)
        try:
            async with self.client.request(
                method, self.url, data=self.data, headers=headers, allow_redirects=False
            ) as upstream:
                if 300 <= upstream.status < 400:
                    raise _Refused(f"HTTP {upstream.status}, a redirect, which the gateway does not follow")
                if upstream.status >= 400:
                    return await self._upstream_error(upstream)
                await self._start(
                    web.StreamResponse(status=upstream.status, headers=_agent_headers(upstream, self.masker))
                )
                if upstream.headers.get("content-type", "").startswith("text/event-stream"):
                    await self._relay_events(upstream)
                else:
                    await self._relay_body(upstream)
                await self._send(b"", end=True)
                self._record(upstream.status, None)
        except _AgentGone:
            self._record(self._status(), None, finish="agent_disconnected")
        except asyncio.CancelledError:
            self._record(self._status(), None, finish="agent_disconnected")
            raise
        except (TimeoutError, _Refused, BrokeOff, aiohttp.ClientError, OSError) as exc:
            return await self._failed(exc)
        assert self.response is not None
        return self.response

    def _status(self) -> int | None:
        """The status the agent received, once the answer has started."""
        return self.response.status if self.response is not None else None

    async def _start(self, response: web.StreamResponse) -> None:
        self.response = response
        try:
            await response.prepare(self.request)
        except (ConnectionError, RuntimeError) as exc:
            raise _AgentGone from exc

    async def _send(self, data: bytes, end: bool = False) -> None:
        assert self.response is not None
        try:
            if data:
                await self.response.write(data)
            if end:
                await self.response.write_eof()
        except (ConnectionError, RuntimeError) as exc:
            raise _AgentGone from exc

    async def _relay_events(self, upstream: aiohttp.ClientResponse) -> None:
        """Events as they come; the step is recorded before the protocol's last event is sent,
        so it exists by the time the agent's SDK sees the answer end."""
        splitter = EventSplitter(self.masker, self.limits.max_event_bytes)
        async for chunk in upstream.content.iter_any():
            out = bytearray()
            for raw, whole in splitter.feed(chunk):
                if whole and self.recorder is not None:
                    name, data = parse_event(raw)
                    if data is not None:
                        self.recorder.event(name, data)
                    if self.added_usage and _usage_only(data):
                        continue  # asked for by the gateway, not by the agent
                out += raw
            if self.recorder is not None and self.recorder.ended:
                self._record(upstream.status, None)
            await self._send(bytes(out))
        await self._send(splitter.flush())
        self.skipped = splitter.skipped
        if self.recorder is not None and not self.recorder.ended and not splitter.skipped:
            raise BrokeOff("the stream ended before its last event")

    async def _relay_body(self, upstream: aiohttp.ClientResponse) -> None:
        """The body as it comes, masked; the step is recorded before its end is sent."""
        kept = bytearray()
        async for chunk in upstream.content.iter_any():
            sent = self.masker.feed(chunk)
            if len(kept) <= self.limits.max_event_bytes:
                kept += sent
            await self._send(sent)
        rest = self.masker.flush()
        kept += rest
        if self.recorder is not None and len(kept) <= self.limits.max_event_bytes:
            try:
                self.recorder.whole(json.loads(kept))
            except (ValueError, ModelError):
                self.recorder.stream_error = "the model endpoint's answer could not be read"
        self._record(upstream.status, None)
        await self._send(rest)

    async def _upstream_error(self, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
        """The upstream's error status and body (masked) for the agent; a body that is not a JSON
        object becomes the protocol's error around its text."""
        raw = await upstream.content.read(_ERROR_BODY_LIMIT)
        text = self.masker.mask(raw).decode("utf-8", "replace")
        try:
            body: Any = json.loads(text)
        except ValueError:
            body = None
        message = server_message(body, text)
        self._record(upstream.status, f"HTTP {upstream.status} from {self.url}: {message}")
        if isinstance(body, dict) and self.agent_protocol is None:
            content = json.dumps(body).encode()
        else:
            content = error_json(self._error_protocol, upstream.status, f"the model endpoint: {message}")
        headers = {**_agent_headers(upstream, self.masker), "content-type": "application/json"}
        return web.Response(status=upstream.status, body=content, headers=headers)

    async def _failed(self, exc: BaseException) -> web.StreamResponse:
        """No answer from upstream: a 502 (504 after a timeout) in the protocol's shape, or, once
        the answer has started, the protocol's error event as its last."""
        timed_out = isinstance(exc, TimeoutError)
        status = 504 if timed_out else 502
        if self.response is not None:
            cause = exc if isinstance(exc, BrokeOff) else f"{type(exc).__name__}: {exc}"
            detail, said = (
                f"the answer from {self.url} broke off ({cause})",
                "the model endpoint's answer broke off",
            )
        elif isinstance(exc, _Refused):
            detail, said = f"{self.url} answered {exc}", f"the model endpoint answered {exc}"
        else:
            detail = transport_error(self.url, exc, timed_out).message
            said = f"the model endpoint {'did not answer in time' if timed_out else 'could not be reached'}"
        if self.response is None:
            self._record(status, detail)
            return error_response(self._error_protocol, status, said)
        self._record(self.response.status, detail)
        with contextlib.suppress(_AgentGone):
            await self._send(self._error_event(said), end=True)
        return self.response

    @property
    def _error_protocol(self) -> ErrorProtocol:
        return self.agent_protocol or self.session.upstream.protocol

    def _error_event(self, message: str) -> bytes:
        """A failure after the stream started, as the agent's protocol ends a stream on one."""
        return error_event(self.route, message)

    def _record(self, status: int | None, error: str | None, finish: str | None = None) -> None:
        """End the call's model step (once: a session closed meanwhile has ended it already)."""
        call = self.call
        if call is None or call.step is not None:
            return
        answer: ModelResponse | None = self.recorder.response() if self.recorder is not None else None
        cut = self.skipped or bool(self.recorder and self.recorder.cut)
        stream_error = self.recorder.stream_error if self.recorder is not None else None
        if error is None and stream_error is not None and finish is None:
            error = f"the model endpoint's stream reported an error: {stream_error}"
        if answer is not None:
            answer, was_cut = capped(answer, self.limits.max_recorded_chars)
            cut = cut or was_cut
        step = model_step(call.started, call.summary, answer, error)
        update: dict[str, Any] = {
            "http_status": status,
            "requested_model": self.requested_model,
            "truncated": cut,
            "error": error,
        }
        if finish is not None:
            update["finish_reason"] = finish
            update["stop"] = "other"
        call.end(step.model_copy(update=update))


def error_response(protocol: ErrorProtocol, status: int, message: str) -> web.Response:
    """A refusal or failure as one line of JSON in the protocol's error shape."""
    return web.Response(
        status=status, body=error_json(protocol, status, message), content_type="application/json"
    )


class Forwarder:
    """Forwards the calls of every session over one pooled HTTP client."""

    def __init__(self, client: aiohttp.ClientSession, limits: Limits) -> None:
        self.client = client
        self.limits = limits

    async def handle(
        self, session: GatewaySession, route: Route, request: web.BaseRequest, query: str
    ) -> web.StreamResponse:
        upstream = session.upstream
        url = upstream.url(route.upstream_path(upstream.protocol), query)
        if route.method == "GET":
            if upstream.model is not None:
                return model_list(upstream.model)
            return await Exchange(self.client, self.limits, session, route, request, url, None).run()
        try:
            body = await read_body(request, self.limits.max_body_bytes)
        except BadRequest as refused:
            return error_response(upstream.protocol, refused.status, refused.message)
        if route.generates and session.refuses_call():
            return error_response(route.protocol or upstream.protocol, 400, session.limit_message())
        requested = body.get("model")
        if upstream.model is not None:
            body["model"] = upstream.model
        added_usage = route.api == "chat" and bool(body.get("stream")) and _ask_for_usage(body)
        call = (
            session.begin(request_summary(route, upstream, body, body.get("model", "")))
            if route.generates
            else None
        )
        exchange = Exchange(
            self.client,
            self.limits,
            session,
            route,
            request,
            url,
            json.dumps(body).encode(),
            call=call,
            requested_model=requested if requested != body.get("model") else None,
            added_usage=added_usage,
        )
        return await exchange.run()


def _ask_for_usage(body: dict[str, Any]) -> bool:
    """Ask a streamed Chat Completions request for its usage chunk; whether the agent had not."""
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        return False
    body["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
    return True
