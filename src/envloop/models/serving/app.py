"""The HTTP side of `el model serve`: Chat Completions (`/v1/chat/completions`), the Responses API
(`/v1/responses`), Messages (`/v1/messages`) and the Gemini API (`/v1beta/models/ALIAS:
generateContent`, gemini_route.py) for every alias, behind a key of the project.

A key travels as `Authorization: Bearer KEY` (OpenAI SDK), `x-api-key: KEY` (Anthropic SDK) or
`x-goog-api-key: KEY` (Google's; `?key=KEY` on the Gemini routes).
Every refusal is one line, `{"detail": "…"}`: 400 for a request the protocol does not allow (or a
prompt beyond the alias's context), 401 without a valid key of the project, 404 for a model the
endpoint does not serve. The Messages routes give the same line in the Messages protocol's error
shape as well (`{"type": "error", "error": {"type": …, "message": …}}`), the Responses route in the
OpenAI shape (`{"error": {"message": …, "type": …}}`), the Gemini routes in Google's (`{"error":
{"code": …, "message": …, "status": …}}`), which the clients of each read."""

import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

from fastapi import Depends, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ValidationError

from envloop.models.protocol_errors import error_body as protocol_error_body
from envloop.models.serving import chat_route, messages_route, responses_route
from envloop.models.serving.engine import (
    WAITING,
    ChatCall,
    Engine,
    Generation,
    Producer,
    ServingError,
    Waiting,
)
from envloop.models.serving.gemini_route import GEMINI_PREFIXES, add_gemini_routes

Authenticate = Callable[[str], bool]
"""Whether a presented key may use the endpoint."""

Body = TypeVar("Body", bound=BaseModel)
_MAX_BODY_BYTES = 8 * 1024 * 1024
_KEEP_ALIVE_SEC = 10.0


async def read_body(request: Request, model: type[Body]) -> Body:
    raw = await request.body()
    if len(raw) > _MAX_BODY_BYTES:
        raise ServingError(413, f"the request body is larger than {_MAX_BODY_BYTES // 1024 // 1024} MiB")
    try:
        data = json.loads(raw)
    except ValueError:
        raise ServingError(400, "the request body is not JSON") from None
    if not isinstance(data, dict):
        raise ServingError(400, "the request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise ServingError(400, f"{where}: {first['msg']}"[:300]) from None


def _model_entry(model_id: str) -> dict[str, Any]:
    """One served model, in the fields both SDKs' model lists read."""
    return {
        "id": model_id,
        "object": "model",
        "type": "model",
        "display_name": model_id,
        "created": 0,
        "created_at": "1970-01-01T00:00:00Z",
        "owned_by": "envloop",
    }


async def streamed(
    engine: Engine,
    model: str,
    call: ChatCall,
    render: Callable[[Iterator[str | Generation | Waiting]], Iterator[str]],
    keep_alive: Callable[[ServingError], str] | None = None,
) -> StreamingResponse:
    """Events as the model writes; a caller that goes away stops the generation. Without
    `keep_alive` the response starts once the first piece is ready, so a refusal is still a plain
    HTTP error. With it (Messages and Responses, whose callers admit the request first, so a
    refusal is a plain HTTP error there too), the stream starts at once and `render` gets WAITING
    every few seconds while the model reads a long prompt, which it sends as a keep-alive event:
    clients give up on a silent stream after a while (Claude Code after 5 minutes), and a 135M
    model on two cores reads Claude Code's 9,000-token prompt for about that long. A failure after
    the start is the stream's last event, given by `keep_alive`."""
    wait_sec = _KEEP_ALIVE_SEC if keep_alive else None
    producer = Producer(engine.stream(model, call))
    first = WAITING if keep_alive else await run_in_threadpool(producer.get)

    def pieces() -> Iterator[str | Generation | Waiting]:
        item = first
        while item is not None:
            yield item
            item = producer.get(wait_sec)

    events = render(pieces())

    async def body() -> AsyncIterator[str]:
        try:
            while (event := await run_in_threadpool(next, events, None)) is not None:
                yield event
        except ServingError as exc:
            if keep_alive is None:
                raise
            yield keep_alive(exc)
        finally:
            producer.cancel()

    return StreamingResponse(body(), media_type="text/event-stream")


def create_model_app(engine: Engine, authenticate: Authenticate) -> FastAPI:
    app = FastAPI(title="envloop local models", openapi_url=None, docs_url=None, redoc_url=None)

    @app.exception_handler(ServingError)
    async def refused(request: Request, exc: ServingError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        body: dict[str, Any] = {"detail": exc.detail}
        if request.url.path.startswith("/v1/messages"):
            body = messages_route.error_body(exc.status, exc.detail)
        elif request.url.path.startswith("/v1/responses"):
            body.update(protocol_error_body("openai", exc.status, exc.detail))
        elif request.url.path.startswith(GEMINI_PREFIXES):
            body.update(protocol_error_body("gemini", exc.status, exc.detail))
        return JSONResponse(body, status_code=exc.status, headers=headers)

    def key_of_the_project(request: Request) -> None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        key = (
            (token.strip() if scheme.lower() == "bearer" else "")
            or request.headers.get("x-api-key", "").strip()
            or request.headers.get("x-goog-api-key", "").strip()
            or (
                request.query_params.get("key", "").strip()
                if request.url.path.startswith(GEMINI_PREFIXES)
                else ""
            )
        )
        if not key:
            raise ServingError(401, "missing credentials: send Authorization: Bearer KEY or x-api-key: KEY")
        if not authenticate(key):
            raise ServingError(401, "unknown, revoked or expired key, or a key of another project")

    guarded = [Depends(key_of_the_project)]

    @app.get("/health", include_in_schema=False)
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models", dependencies=guarded)
    def models() -> dict[str, Any]:
        ids = engine.model_ids()
        entries = [_model_entry(i) for i in ids]
        return {"object": "list", "data": entries, "has_more": False, "first_id": ids[0], "last_id": ids[-1]}

    @app.post("/v1/chat/completions", dependencies=guarded)
    async def chat_completions(request: Request) -> Any:
        body = await read_body(request, chat_route.ChatRequest)
        engine.alias(body.model)
        call = chat_route.chat_call(body)
        if body.stream:
            usage = body.stream_options is not None and body.stream_options.include_usage
            return await streamed(
                engine,
                body.model,
                call,
                lambda pieces: chat_route.completion_events(body.model, pieces, usage),
            )
        generation = await run_in_threadpool(engine.generate, body.model, call)
        return JSONResponse(chat_route.completion(body.model, generation))

    @app.post("/v1/responses", dependencies=guarded)
    async def responses(request: Request) -> Any:
        body = await read_body(request, responses_route.ResponsesRequest)
        engine.alias(body.model)
        call = responses_route.chat_call(body)
        if body.stream:
            await run_in_threadpool(engine.admit, body.model, call)
            builder = responses_route.new_builder(body)
            return await streamed(
                engine,
                body.model,
                call,
                lambda pieces: responses_route.response_events(builder, pieces),
                keep_alive=lambda exc: responses_route.failed_event(builder, exc.status, exc.detail),
            )
        generation = await run_in_threadpool(engine.generate, body.model, call)
        return JSONResponse(responses_route.response(body, generation))

    @app.post("/v1/messages", dependencies=guarded)
    async def messages(request: Request) -> Any:
        body = await read_body(request, messages_route.MessagesRequest)
        engine.alias(body.model)
        call = messages_route.chat_call(body)
        if body.stream:
            prompt_tokens = await run_in_threadpool(engine.admit, body.model, call)
            return await streamed(
                engine,
                body.model,
                call,
                lambda pieces: messages_route.message_events(body.model, pieces, prompt_tokens),
                keep_alive=lambda exc: messages_route.error_event(exc.status, exc.detail),
            )
        generation = await run_in_threadpool(engine.generate, body.model, call)
        return JSONResponse(messages_route.message(body.model, generation))

    @app.post("/v1/messages/count_tokens", dependencies=guarded)
    async def count_tokens(request: Request) -> dict[str, int]:
        body = await read_body(request, messages_route.CountTokensRequest)
        engine.alias(body.model)
        call = messages_route.chat_call(body)
        return {"input_tokens": await run_in_threadpool(engine.count_tokens, body.model, call)}

    add_gemini_routes(app, engine, guarded, streamed)
    return app
