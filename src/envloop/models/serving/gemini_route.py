"""POST /v1beta/models/ALIAS:generateContent (and `:streamGenerateContent`, `:countTokens`; `/v1/`
too): the Gemini API over the engine, for Gemini-speaking clients (Gemini CLI's
GOOGLE_GEMINI_BASE_URL is the server's root).

A Gemini request is read as the Chat Completions request it amounts to (models/gemini_translation.py, as
the model gateway translates it) and checked as that one is, so both protocols accept and refuse
the same conversations; the answer is Chat Completions' turned into Gemini's, streamed with `alt=sse`
as the text comes. A stream starts at once and gets a newline every few seconds while the model reads
a long prompt (Gemini CLI gives up on headers that take 60 s; its SDK skips the whitespace), so a
failure after the start is the stream's last chunk, the bare error object. The key travels as
`x-goog-api-key` or `?key=`; a refusal is Google's error shape.
"""

import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.params import Depends
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError

from envloop.models.gemini_translation import GeminiChunks, chat_request, gemini_response
from envloop.models.protocol_errors import error_body as protocol_error_body
from envloop.models.serving import chat_route
from envloop.models.serving.engine import ChatCall, Engine, Generation, ServingError, Waiting

GEMINI_PREFIXES = ("/v1beta/models/", "/v1/models/")
_METHODS = ("generateContent", "streamGenerateContent", "countTokens")
_MAX_BODY_BYTES = 8 * 1024 * 1024


def _target(target: str) -> tuple[str, str]:
    model, _, method = target.rpartition(":")
    if not model or method not in _METHODS:
        raise ServingError(404, f"no such method: {method or target} (the API has {', '.join(_METHODS)})")
    return model, method


async def _chat(request: Request, model: str, stream: bool) -> tuple[chat_route.ChatRequest, ChatCall]:
    raw = await request.body()
    if len(raw) > _MAX_BODY_BYTES:
        raise ServingError(413, f"the request body is larger than {_MAX_BODY_BYTES // 1024 // 1024} MiB")
    try:
        body = json.loads(raw)
    except ValueError:
        raise ServingError(400, "the request body is not JSON") from None
    if not isinstance(body, dict):
        raise ServingError(400, "the request body must be a JSON object")
    try:
        chat = chat_route.ChatRequest.model_validate(chat_request(body, model, stream))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise ServingError(400, f"{where} (as Chat Completions): {first['msg']}"[:300]) from None
    return chat, chat_route.chat_call(chat)


def _gemini_events(model: str, pieces: Iterator[str | Generation | Waiting]) -> Iterator[str]:
    chunks = GeminiChunks()
    for event in chat_route.completion_events(model, pieces, include_usage=True):
        data = event.removeprefix("data: ").strip()
        if not event.startswith("data: "):
            yield "\n"  # waiting: Google's SDK skips whitespace between events, not SSE comments
        elif data == "[DONE]":
            yield f"data: {json.dumps(chunks.end())}\r\n\r\n"
        else:
            yield from (f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in chunks.feed(json.loads(data)))


Render = Callable[[Iterator[str | Generation | Waiting]], Iterator[str]]
Stream = Callable[..., Awaitable[StreamingResponse]]


def add_gemini_routes(app: FastAPI, engine: Engine, guarded: list[Depends], stream: Stream) -> None:
    """The routes, on `app`; `stream` is how the app streams a generation (app.streamed)."""

    async def gemini(target: str, request: Request) -> Any:
        model, method = _target(target)
        engine.alias(model)
        chat, call = await _chat(request, model, method == "streamGenerateContent")
        if method == "countTokens":
            return {"totalTokens": await run_in_threadpool(engine.count_tokens, model, call)}
        if chat.stream:
            await run_in_threadpool(engine.admit, model, call)  # a refusal is still an HTTP error
            return await stream(
                engine,
                model,
                call,
                lambda pieces: _gemini_events(model, pieces),
                keep_alive=lambda exc: (
                    json.dumps(protocol_error_body("gemini", exc.status, exc.detail)) + "\n"
                ),
            )
        generation = await run_in_threadpool(engine.generate, model, call)
        return JSONResponse(gemini_response(chat_route.completion(model, generation)))

    for prefix in GEMINI_PREFIXES:
        app.add_api_route(prefix + "{target:path}", gemini, methods=["POST"], dependencies=guarded)
