"""The Messages protocol's JSON form, without its SDK: the request body envloop sends and the answer
read from a response's JSON. Tool results travel as `tool_result` blocks in the user turn after the
assistant's `tool_use` (consecutive results, and any user text after them, merge into that one
turn, as the protocol requires alternating roles). An assistant turn envloop produced is replayed
from its `native` blocks, so thinking blocks go back with their signatures intact. The gateway
reads what it forwards through these without loading the `anthropic` SDK (more than a second of
start-up); the client over the SDK is `anthropic_messages`.
"""

from typing import Any

from envloop.models.base import json_count, json_object, json_text
from envloop.models.settings import ANTHROPIC_DEFAULT_MAX_TOKENS, ModelSettings
from envloop.models.types import Message, ModelRequest, ModelResponse, ResponseStop, ToolCall, Usage

_STOPS: dict[str, ResponseStop] = {
    "end_turn": "end",
    "stop_sequence": "end",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "refusal",
}


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    if message.native is not None:
        return message.native
    blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
    blocks += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in message.tool_calls
    ]
    return blocks


def message_blocks(messages: list[Message]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant":
            turns.append({"role": "assistant", "content": _assistant_blocks(message)})
            continue
        if message.role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
                "content": message.content,
            }
            if message.is_error:
                block["is_error"] = True
        else:
            block = {"type": "text", "text": message.content}
        if turns and turns[-1]["role"] == "user":
            turns[-1]["content"].append(block)
        else:
            turns.append({"role": "user", "content": [block]})
    return turns


def request_body(settings: ModelSettings, request: ModelRequest) -> dict[str, Any]:
    """The JSON body of the request: only what the profile sets is sent."""
    body: dict[str, Any] = {
        "model": settings.model,
        "max_tokens": settings.max_output_tokens or ANTHROPIC_DEFAULT_MAX_TOKENS,
        "messages": message_blocks(request.messages),
    }
    if request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
        if request.tool_choice == "auto":
            body["tool_choice"] = {"type": "auto"}
        elif request.tool_choice == "required":
            body["tool_choice"] = {"type": "any"}
        elif request.tool_choice:
            body["tool_choice"] = {"type": "tool", "name": request.tool_choice}
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.top_p is not None:
        body["top_p"] = settings.top_p
    if settings.reasoning_effort is not None:
        body["output_config"] = {"effort": settings.reasoning_effort}
    return body


def message_response(data: Any) -> ModelResponse:
    """The answer from the response's JSON (read as JSON rather than into the SDK's models, which
    would cost more than the rest of a local call; unknown block types are kept in `native`)."""
    message = json_object(data)
    blocks = [block for block in message.get("content") or [] if isinstance(block, dict)]
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            text.append(json_text(block.get("text")))
        elif kind == "thinking":
            reasoning.append(json_text(block.get("thinking")))
        elif kind == "tool_use":
            arguments = block.get("input")
            error = None if isinstance(arguments, dict) else "not a JSON object"
            calls.append(
                ToolCall(
                    id=json_text(block.get("id")),
                    name=json_text(block.get("name")),
                    arguments=json_object(arguments),
                    arguments_error=error,
                )
            )
    usage = json_object(message.get("usage"))
    joined = "".join(text)
    finish = json_text(message.get("stop_reason")) or None
    return ModelResponse(
        text=joined,
        reasoning="".join(reasoning) or None,
        tool_calls=calls,
        stop=_STOPS.get(finish or "", "other"),
        finish_reason=finish,
        usage=Usage(
            input_tokens=json_count(usage.get("input_tokens")),
            output_tokens=json_count(usage.get("output_tokens")),
            cache_read_tokens=json_count(usage.get("cache_read_input_tokens")),
        ),
        model=json_text(message.get("model")) or None,
        response_id=json_text(message.get("id")) or None,
        message=Message(role="assistant", content=joined, tool_calls=calls, native=blocks),
    )
