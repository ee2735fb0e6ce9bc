"""The HTTP side of `el model serve`: Chat Completions (`/v1/chat/completions`) and Messages
(`/v1/messages`) for every alias, behind a key of the project.

A key travels as `Authorization: Bearer KEY` (OpenAI SDK) or `x-api-key: KEY` (Anthropic SDK).
Every refusal is one line, `{"detail": "…"}`: 400 for a request the protocol does not allow, 401
without a valid key of the project, 404 for a model the endpoint does not serve."""

import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

from fastapi import Depends, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ValidationError

from envloop.models.serving import anthropic_wire, openai_wire
from envloop.models.serving.engine import ChatCall, Engine, Generation, Producer, ServingError

Authenticate = Callable[[str], bool]
"""Whether a presented key may use the endpoint."""

Body = TypeVar("Body", bound=BaseModel)
_MAX_BODY_BYTES = 8 * 1024 * 1024


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


def create_model_app(engine: Engine, authenticate: Authenticate) -> FastAPI:
    app = FastAPI(title="envloop local models", openapi_url=None, docs_url=None, redoc_url=None)

    @app.exception_handler(ServingError)
    async def refused(request: Request, exc: ServingError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse({"detail": exc.detail}, status_code=exc.status, headers=headers)

    def key_of_the_project(request: Request) -> None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        key = (token.strip() if scheme.lower() == "bearer" else "") or request.headers.get(
            "x-api-key", ""
        ).strip()
        if not key:
            raise ServingError(401, "missing credentials: send Authorization: Bearer KEY or x-api-key: KEY")
        if not authenticate(key):
            raise ServingError(401, "unknown, revoked or expired key, or a key of another project")

    guarded = [Depends(key_of_the_project)]

    async def streamed(
        model: str, call: ChatCall, render: Callable[[Iterator[str | Generation]], Iterator[str]]
    ) -> StreamingResponse:
        """Events as the model writes; the response starts once the first piece is ready, so a
        refusal is still a plain HTTP error, and a caller that goes away stops the generation."""
        producer = Producer(engine.stream(model, call))
        first = await run_in_threadpool(producer.get)

        def pieces() -> Iterator[str | Generation]:
            item = first
            while item is not None:
                yield item
                item = producer.get()

        events = render(pieces())

        async def body() -> AsyncIterator[str]:
            try:
                while (event := await run_in_threadpool(next, events, None)) is not None:
                    yield event
            finally:
                producer.cancel()

        return StreamingResponse(body(), media_type="text/event-stream")

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
        body = await read_body(request, openai_wire.ChatRequest)
        engine.alias(body.model)
        call = openai_wire.chat_call(body)
        if body.stream:
            usage = body.stream_options is not None and body.stream_options.include_usage
            return await streamed(
                body.model, call, lambda pieces: openai_wire.completion_events(body.model, pieces, usage)
            )
        generation = await run_in_threadpool(engine.generate, body.model, call)
        return JSONResponse(openai_wire.completion(body.model, generation))

    @app.post("/v1/messages", dependencies=guarded)
    async def messages(request: Request) -> Any:
        body = await read_body(request, anthropic_wire.MessagesRequest)
        engine.alias(body.model)
        call = anthropic_wire.chat_call(body)
        if body.stream:
            return await streamed(
                body.model, call, lambda pieces: anthropic_wire.message_events(body.model, pieces)
            )
        generation = await run_in_threadpool(engine.generate, body.model, call)
        return JSONResponse(anthropic_wire.message(body.model, generation))

    return app
