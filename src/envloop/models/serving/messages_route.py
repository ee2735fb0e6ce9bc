"""POST /v1/messages: the Messages protocol over the engine, streamed or not.

A conversation becomes the engine's Chat Completions shape: `system` leads, an assistant's
`tool_use` blocks become its tool calls, a user turn's `tool_result` blocks become tool messages
(before the turn's own text), and the answer goes back as `text` and `tool_use` blocks.

What Claude Code sends besides is taken as follows. A `system` turn inside `messages` (its
mid-conversation system beta) reaches the model as a user turn: the chat format would repeat every
tool's definition after each system turn. `thinking` is accepted and ignored (this model writes no
thinking blocks, which the protocol allows for `adaptive` and which clients take as no thinking);
`metadata`, `context_management`, `output_config`, `cache_control` and the `anthropic-beta` header
change nothing here and are ignored. `POST /v1/messages/count_tokens` takes the same request without
`max_tokens` and counts the prompt the model would read.
"""

import json
import uuid
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from envloop.models.protocol_errors import error_body as protocol_error_body
from envloop.models.serving.engine import ChatCall, Generation, ToolMode, Waiting

_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def error_body(status: int, detail: str) -> dict[str, Any]:
    """A refusal in the protocol's shape, which the SDK and Claude Code read (and show) its
    message from; `detail` carries the same line as on every other route of the endpoint."""
    return {**protocol_error_body("anthropic", status, detail), "detail": detail}


class TextBlock(BaseModel):
    type: Literal["text"]
    text: str


class ToolUseBlock(BaseModel):
    type: Literal["tool_use"]
    id: str
    name: str = Field(min_length=1)
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResultBlock(BaseModel):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[TextBlock] | None = None
    is_error: bool = False


Block = Annotated[TextBlock | ToolUseBlock | ToolResultBlock, Field(discriminator="type")]


class Message(BaseModel):
    role: Literal["user", "assistant", "system"]
    content: str | list[Block]


class Tool(BaseModel):
    name: str = Field(min_length=1, max_length=64)
    description: str | None = None
    input_schema: dict[str, Any]


class ToolChoice(BaseModel):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None


class Thinking(BaseModel):
    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: int | None = Field(default=None, ge=0)


class CountTokensRequest(BaseModel):
    """A Messages request as `count_tokens` takes it: no `max_tokens`, no `stream`."""

    model: str
    messages: list[Message] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, gt=0, le=1)
    stop_sequences: list[str] | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    thinking: Thinking | None = None


class MessagesRequest(CountTokensRequest):
    max_tokens: int = Field(ge=1)
    stream: bool = False


def _joined(content: str | list[TextBlock] | None) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(block.text for block in content)


def _chat_messages(request: CountTokensRequest) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": _joined(request.system)})
    for message in request.messages:
        blocks: list[Block] = (
            [TextBlock(type="text", text=message.content)]
            if isinstance(message.content, str)
            else message.content
        )
        text = "".join(b.text for b in blocks if isinstance(b, TextBlock))
        if message.role == "system":
            messages.append({"role": "user", "content": text})
            continue
        if message.role == "assistant":
            calls = [
                {
                    "id": b.id,
                    "type": "function",
                    "function": {"name": b.name, "arguments": json.dumps(b.input)},
                }
                for b in blocks
                if isinstance(b, ToolUseBlock)
            ]
            messages.append(
                {"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})}
            )
            continue
        for block in blocks:
            if isinstance(block, ToolResultBlock):
                result = ("error: " if block.is_error else "") + _joined(block.content)
                messages.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": result})
        if text or not any(isinstance(b, ToolResultBlock) for b in blocks):
            messages.append({"role": "user", "content": text})
    return messages


def chat_call(request: CountTokensRequest) -> ChatCall:
    choice = request.tool_choice
    modes: dict[str, ToolMode] = {"auto": "auto", "any": "required", "tool": "named", "none": "none"}
    return ChatCall(
        messages=_chat_messages(request),
        tools=[
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description or "",
                    "parameters": t.input_schema,
                },
            }
            for t in request.tools or []
        ],
        tool_mode=modes[choice.type] if choice else "auto",
        tool_name=choice.name if choice and choice.type == "tool" else None,
        temperature=request.temperature,
        top_p=request.top_p,
        max_tokens=request.max_tokens if isinstance(request, MessagesRequest) else None,
        stop=list(request.stop_sequences or []),
    )


def _input(arguments: str) -> dict[str, Any]:
    """A tool call's input object; arguments that are not a JSON object are kept as text under
    `arguments`, so nothing the model wrote is lost."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"arguments": arguments}


def _blocks(generation: Generation) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if generation.text or not generation.tool_calls:
        blocks.append({"type": "text", "text": generation.text})
    blocks += [
        {
            "type": "tool_use",
            "id": f"toolu_{uuid.uuid4().hex[:24]}",
            "name": c.name,
            "input": _input(c.arguments),
        }
        for c in generation.tool_calls
    ]
    return blocks


def message(model: str, generation: Generation) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _blocks(generation),
        "stop_reason": _STOP[generation.finish],
        "stop_sequence": None,
        "usage": {"input_tokens": generation.prompt_tokens, "output_tokens": generation.completion_tokens},
    }


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"


def error_event(status: int, detail: str) -> str:
    """A failure after the stream started, as the protocol's `error` event."""
    body = error_body(status, detail)
    return _event("error", {"error": body["error"]})


def message_events(
    model: str, pieces: Iterator[str | Generation | Waiting], prompt_tokens: int
) -> Iterator[str]:
    """Server-sent events in the protocol's order: message_start (with the prompt's tokens, where
    clients such as Claude Code read a call's input tokens), a text block grown by deltas,
    each tool_use block with its input as one JSON delta, message_delta (stop reason, usage),
    message_stop; a `ping` for each WAITING."""
    start: dict[str, Any] = {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": prompt_tokens, "output_tokens": 0},
    }
    yield _event("message_start", {"message": start})
    text_open = False
    for piece in pieces:
        if isinstance(piece, Waiting):
            yield _event("ping", {})
            continue
        if isinstance(piece, str):
            if not text_open:
                text_open = True
                yield _event(
                    "content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}
                )
            yield _event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}})
            continue
        for index, block in enumerate(_blocks(piece)):
            if block["type"] == "text":
                if not text_open:
                    yield _event("content_block_start", {"index": 0, "content_block": block})
                yield _event("content_block_stop", {"index": 0})
            else:
                opening = {**block, "input": {}}
                yield _event("content_block_start", {"index": index, "content_block": opening})
                partial = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                yield _event("content_block_delta", {"index": index, "delta": partial})
                yield _event("content_block_stop", {"index": index})
        usage = {"input_tokens": piece.prompt_tokens, "output_tokens": piece.completion_tokens}
        delta = {"stop_reason": _STOP[piece.finish], "stop_sequence": None}
        yield _event("message_delta", {"delta": delta, "usage": usage})
    yield _event("message_stop", {})
