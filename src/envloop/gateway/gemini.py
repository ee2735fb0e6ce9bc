"""The Gemini API at the gateway, for agents that speak it (Gemini CLI): `generateContent`,
`streamGenerateContent` (`?alt=sse`) and `countTokens` under `/v1beta/models/MODEL:` (or `/v1/`),
the token as `x-goog-api-key` or `?key=`. MODEL is the path's text up to the method (it may hold
slashes: `team/sft`); it is only ever sent upstream in the body, never as a path.

The gateway translates: a Gemini request goes upstream as Chat Completions (models/gemini_translation.py)
to the trial's OpenAI-protocol upstream, and the answer, whole or streamed, comes back as Gemini's.
A profile therefore reaches a Gemini-speaking agent with the same endpoint it gives every other
agent (`el model serve`, any Chat Completions server, Google's own OpenAI-compatible endpoint among
them); a trial whose upstream speaks Anthropic Messages is refused with a 404 in Gemini's shape.
The model step records the call as it went upstream (Chat Completions), with `agent_protocol:
gemini` among its params. `countTokens` is answered by the gateway from the request's length (Chat
Completions has no way to ask), unrecorded.
"""

import asyncio
import contextlib
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import aiohttp
from aiohttp import web

from envloop.gateway.forward import BadRequest, BrokeOff, Exchange, Forwarder, error_response, read_body
from envloop.gateway.recording import request_summary
from envloop.gateway.routes import Route, TargetRefused
from envloop.gateway.session import GatewaySession
from envloop.gateway.to_agent import EventSplitter, parse_event
from envloop.models.gemini_translation import GeminiChunks, chat_request, estimated_tokens, gemini_response
from envloop.models.protocol_errors import error_body

_TARGET = re.compile(
    r"/(v1beta|v1)/models/(?P<model>[A-Za-z0-9][A-Za-z0-9._:@+/-]{0,255})"
    r":(?P<method>generateContent|streamGenerateContent|countTokens)"
)
_CHAT = Route("chat", "POST", "/v1/chat/completions", "openai")
_MAX_QUERY = 512
KEEP_ALIVE_SEC = 20.0


@dataclass(frozen=True)
class GeminiCall:
    """A Gemini request target: the model it names, the method, and the key it carried, if any."""

    model: str
    method: str
    key: str | None

    @property
    def stream(self) -> bool:
        return self.method == "streamGenerateContent"


def gemini_target(method: str, target: str) -> GeminiCall | None:
    """The Gemini call a raw request target is, or None when it is not one of Gemini's paths."""
    path, _, query = target.partition("?")
    found = _TARGET.fullmatch(path)
    if found is None:
        return None
    if method != "POST":
        raise TargetRefused(405, f"{method} is not allowed on {path}")
    if len(query) > _MAX_QUERY:
        raise TargetRefused(400, "the query string is too long")
    keys = [value for name, value in parse_qsl(query) if name == "key"]
    return GeminiCall(found["model"], found["method"], keys[0] if keys else None)


def _sse(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\r\n\r\n"


def _error_chunk(status: int, message: str) -> bytes:
    """An error once the answer has started: the bare JSON object, which Google's SDK reads as an
    error with its status when a chunk of the body is one."""
    return json.dumps(error_body("gemini", status, message)).encode() + b"\n"


@dataclass
class GeminiExchange(Exchange):
    """A Chat Completions exchange upstream whose answer reaches the agent as Gemini's.

    Gemini CLI gives up on an answer whose headers take 60 s (its HTTP client's fixed headers
    timeout), and a local model reading a long prompt stays silent longer than that. So when the
    upstream has not answered after KEEP_ALIVE_SEC, the agent's answer starts (200) and a newline is
    sent every KEEP_ALIVE_SEC until it does: Google's SDK skips whitespace before a stream's `data:`
    and a JSON parser before a body. An upstream error after that start reaches the agent as an
    error chunk (`_error_chunk`) instead of an error status."""

    keep_alive: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        self._lock = asyncio.Lock()
        self._answered = False
        self._keeper: asyncio.Task[None] | None = None

    async def run(self) -> web.StreamResponse:
        if self.keep_alive:
            self._keeper = asyncio.create_task(self._keep_the_agent())
        try:
            return await super().run()
        finally:
            await self._stop_keeping()

    async def _keep_the_agent(self) -> None:
        content_type = (
            "text/event-stream" if self.request.path.endswith("streamGenerateContent") else "application/json"
        )
        try:
            while True:
                await asyncio.sleep(KEEP_ALIVE_SEC)
                async with self._lock:
                    if self._answered:
                        return
                    if self.response is None:
                        response = web.StreamResponse(status=200, headers={"Content-Type": content_type})
                        await response.prepare(self.request)
                        self.response = response
                    await self.response.write(b"\n")
        except (ConnectionError, RuntimeError):
            return  # the agent went away: the exchange finds out on its own

    async def _stop_keeping(self) -> None:
        """No more keep-alives (the upstream answered, or the exchange ended)."""
        self._answered = True
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            async with self._lock:
                keeper.cancel()
            await asyncio.wait([keeper])  # its end, without taking its cancellation for ours

    async def _start(self, response: web.StreamResponse) -> None:
        await self._stop_keeping()
        if self.response is None:
            await super()._start(response)

    async def _failed(self, exc: BaseException) -> web.StreamResponse:
        await self._stop_keeping()
        return await super()._failed(exc)

    async def _upstream_error(self, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
        await self._stop_keeping()
        answer = await super()._upstream_error(upstream)
        if self.response is None:
            return answer
        assert isinstance(answer, web.Response) and isinstance(answer.body, bytes)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.response.write(answer.body + b"\n")
            await self.response.write_eof()
        return self.response

    async def _relay_events(self, upstream: aiohttp.ClientResponse) -> None:
        assert self.recorder is not None
        splitter = EventSplitter(self.masker, self.limits.max_event_bytes)
        chunks = GeminiChunks()
        async for piece in upstream.content.iter_any():
            out = bytearray()
            for raw, whole in splitter.feed(piece):
                if not whole:
                    raise BrokeOff("an event longer than the gateway reads, which it cannot translate")
                name, data = parse_event(raw)
                if data is None or chunks.ended:
                    continue
                self.recorder.event(name, data)
                if self.recorder.stream_error is not None:
                    message = f"the model endpoint's stream reported an error: {self.recorder.stream_error}"
                    out += _error_chunk(502, message)
                    chunks.ended = True
                elif data == "[DONE]":
                    out += _sse(chunks.end())
                else:
                    out += b"".join(_sse(chunk) for chunk in chunks.feed(data))
            if chunks.ended:
                self._record(upstream.status, None)
            await self._send(bytes(out))
        if not chunks.ended:
            raise BrokeOff("the stream ended before its last event")

    async def _relay_body(self, upstream: aiohttp.ClientResponse) -> None:
        assert self.recorder is not None
        kept = bytearray()
        async for piece in upstream.content.iter_any():
            kept += self.masker.feed(piece)
            if len(kept) > self.limits.max_event_bytes:
                raise BrokeOff("an answer longer than the gateway reads, which it cannot translate")
        kept += self.masker.flush()
        try:
            data = json.loads(kept)
        except ValueError:
            raise BrokeOff("the model endpoint's answer is not JSON") from None
        self.recorder.whole(data)
        self._record(upstream.status, None)
        await self._send(json.dumps(gemini_response(data)).encode())

    def _error_event(self, message: str) -> bytes:
        return _error_chunk(502, message)


async def handle_gemini(
    forwarder: Forwarder, session: GatewaySession, call: GeminiCall, request: web.BaseRequest
) -> web.StreamResponse:
    upstream = session.upstream
    if upstream.protocol != "openai":
        message = (
            "this trial's model speaks the Anthropic Messages protocol; the gateway carries "
            "Gemini's API to an OpenAI-protocol (Chat Completions) model only"
        )
        return error_response("gemini", 404, message)
    try:
        body = await read_body(request, forwarder.limits.max_body_bytes)
    except BadRequest as refused:
        return error_response("gemini", refused.status, refused.message)
    if call.method == "countTokens":
        return web.json_response({"totalTokens": estimated_tokens(body)})
    if session.refuses_call():
        return error_response("gemini", 400, session.limit_message())
    model = upstream.model or call.model
    chat = chat_request(body, model, call.stream)
    summary = request_summary(_CHAT, upstream, chat, model)
    summary.params["agent_protocol"] = "gemini"
    exchange = GeminiExchange(
        forwarder.client,
        forwarder.limits,
        session,
        _CHAT,
        request,
        upstream.url(_CHAT.upstream_path("openai")),
        json.dumps(chat).encode(),
        call=session.begin(summary),
        requested_model=call.model if call.model != model else None,
        agent_protocol="gemini",
        keep_alive=True,
    )
    return await exchange.run()
