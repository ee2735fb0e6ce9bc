"""POST /v1/chat/completions: the Chat Completions protocol over the engine, streamed or not."""

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, Field

from envloop.models.serving.engine import ChatCall, Generation, ToolMode, Waiting

_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls"}


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class FunctionCall(BaseModel):
    name: str = Field(min_length=1)
    arguments: str = ""


class ToolCallIn(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(BaseModel):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None


class FunctionSpec(BaseModel):
    name: str = Field(min_length=1, max_length=64)
    description: str | None = None
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolSpec(BaseModel):
    type: Literal["function"]
    function: FunctionSpec


class NamedFunction(BaseModel):
    name: str


class NamedToolChoice(BaseModel):
    type: Literal["function"]
    function: NamedFunction


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatRequest(BaseModel):
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ToolSpec] | None = None
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int | None = Field(default=None, ge=1, le=1, description="one choice per request")
    stream: bool = False
    stream_options: StreamOptions | None = None


def _text(content: str | list[TextPart] | None) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(part.text for part in content)


def chat_call(request: ChatRequest) -> ChatCall:
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        role = "system" if message.role == "developer" else message.role
        entry: dict[str, Any] = {"role": role, "content": _text(message.content)}
        if message.tool_calls:
            entry["tool_calls"] = [c.model_dump() for c in message.tool_calls]
        if message.tool_call_id is not None:
            entry["tool_call_id"] = message.tool_call_id
        messages.append(entry)
    choice = request.tool_choice
    mode: ToolMode = "named" if isinstance(choice, NamedToolChoice) else (choice or "auto")
    return ChatCall(
        messages=messages,
        tools=[tool.model_dump(exclude_none=True) for tool in request.tools or []],
        tool_mode=mode,
        tool_name=choice.function.name if isinstance(choice, NamedToolChoice) else None,
        temperature=request.temperature,
        top_p=request.top_p,
        max_tokens=request.max_completion_tokens or request.max_tokens,
        stop=[request.stop] if isinstance(request.stop, str) else list(request.stop or []),
        seed=request.seed,
    )


def _tool_calls(generation: Generation) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": c.name, "arguments": c.arguments},
        }
        for c in generation.tool_calls
    ]


def _usage(generation: Generation) -> dict[str, int]:
    return {
        "prompt_tokens": generation.prompt_tokens,
        "completion_tokens": generation.completion_tokens,
        "total_tokens": generation.prompt_tokens + generation.completion_tokens,
    }


def completion(model: str, generation: Generation) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": generation.text or None}
    if generation.tool_calls:
        message["tool_calls"] = _tool_calls(generation)
    elif message["content"] is None:
        message["content"] = ""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": _FINISH[generation.finish], "logprobs": None}
        ],
        "usage": _usage(generation),
    }


def completion_events(
    model: str, pieces: Iterator[str | Generation | Waiting], include_usage: bool
) -> Iterator[str]:
    """Server-sent events: chunks with the text as it comes, the tool calls whole, the finish
    reason, the usage when asked for, then `[DONE]`; a WAITING is an SSE comment, which clients
    skip."""
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return f"data: {json.dumps({**base, 'model': model, 'choices': [choice]})}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for piece in pieces:
        if isinstance(piece, Waiting):
            yield ": waiting\n\n"
            continue
        if isinstance(piece, str):
            yield chunk({"content": piece})
            continue
        if piece.tool_calls:
            calls = [{"index": i, **call} for i, call in enumerate(_tool_calls(piece))]
            yield chunk({"tool_calls": calls})
        yield chunk({}, _FINISH[piece.finish])
        if include_usage:
            yield f"data: {json.dumps({**base, 'model': model, 'choices': [], 'usage': _usage(piece)})}\n\n"
    yield "data: [DONE]\n\n"
