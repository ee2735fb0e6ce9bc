"""The Chat Completions protocol's JSON form, without its SDK: the request body envloop sends, the
answer read from a response's JSON, and a stream's chunks gathered into that answer. The gateway
reads what it forwards through these, so neither it nor anything that imports it loads the `openai`
SDK (about a second of start-up); the client over the SDK is `openai_chat`.

Reasoning text that compatible servers return beside the answer (`reasoning_content` or
`reasoning`) is kept as the response's reasoning.
"""

import json
from typing import Any

from envloop.models.base import TextBuffer, json_count, json_object, json_text
from envloop.models.settings import ModelSettings
from envloop.models.types import (
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    ResponseStop,
    ToolCall,
    Usage,
)

_STOPS: dict[str, ResponseStop] = {
    "stop": "end",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "refusal",
}


def _message_json(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content}
    if message.role == "user":
        return {"role": "user", "content": message.content}
    # An empty string, not null: some compatible servers (llama.cpp's) refuse a null content.
    sent: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        sent["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.raw_arguments
                    if call.raw_arguments is not None
                    else json.dumps(call.arguments),
                },
            }
            for call in message.tool_calls
        ]
    return sent


def request_body(settings: ModelSettings, request: ModelRequest) -> dict[str, Any]:
    """The JSON body of the request: only what the profile sets is sent."""
    messages = [{"role": "system", "content": request.system}] if request.system else []
    messages += [_message_json(m) for m in request.messages]
    body: dict[str, Any] = {"model": settings.model, "messages": messages}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
            }
            for t in request.tools
        ]
        if request.tool_choice in ("auto", "required"):
            body["tool_choice"] = request.tool_choice
        elif request.tool_choice:
            body["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice}}
    optional = {
        "max_tokens": settings.max_output_tokens,
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "reasoning_effort": settings.reasoning_effort,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    return body


def parse_tool_call(call_id: str, name: str, raw: str) -> ToolCall:
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        return ToolCall(id=call_id, name=name, raw_arguments=raw, arguments_error=f"not JSON: {exc}")
    if not isinstance(arguments, dict):
        return ToolCall(id=call_id, name=name, raw_arguments=raw, arguments_error="not a JSON object")
    return ToolCall(id=call_id, name=name, arguments=arguments, raw_arguments=raw)


def _usage(raw: Any) -> Usage:
    usage = json_object(raw)
    return Usage(
        input_tokens=json_count(usage.get("prompt_tokens")),
        output_tokens=json_count(usage.get("completion_tokens")),
        cache_read_tokens=json_count(json_object(usage.get("prompt_tokens_details")).get("cached_tokens")),
        reasoning_tokens=json_count(
            json_object(usage.get("completion_tokens_details")).get("reasoning_tokens")
        ),
    )


def _reasoning(part: dict[str, Any]) -> str:
    return json_text(part.get("reasoning_content")) or json_text(part.get("reasoning"))


def _response(
    text: str,
    reasoning: str,
    calls: list[ToolCall],
    finish: str | None,
    usage: Usage,
    head: dict[str, Any],
) -> ModelResponse:
    stop = _STOPS.get(finish or "", "other")
    if calls and stop == "end":  # some servers say "stop" after asking for tools
        stop = "tool_calls"
    return ModelResponse(
        text=text,
        reasoning=reasoning or None,
        tool_calls=calls,
        stop=stop,
        finish_reason=finish,
        usage=usage,
        model=json_text(head.get("model")) or None,
        response_id=json_text(head.get("id")) or None,
        message=Message(role="assistant", content=text, tool_calls=calls),
    )


def completion_response(data: Any) -> ModelResponse:
    """The answer from the response's JSON (read as JSON rather than into the SDK's models, which
    would cost more than the rest of a local call; unknown fields are ignored either way)."""
    completion = json_object(data)
    choices = completion.get("choices")
    if not isinstance(choices, list) or not choices:
        raise ModelError("the endpoint answered without any choice", kind="bad_response")
    choice = json_object(choices[0])
    message = json_object(choice.get("message"))
    calls = [
        parse_tool_call(
            json_text(call.get("id")), json_text(function.get("name")), json_text(function.get("arguments"))
        )
        for call in map(json_object, message.get("tool_calls") or [])
        if (function := json_object(call.get("function")))
    ]
    finish = json_text(choice.get("finish_reason")) or None
    return _response(
        json_text(message.get("content")),
        _reasoning(message),
        calls,
        finish,
        _usage(completion.get("usage")),
        completion,
    )


class ChatChunks:
    """A streamed answer's chunks gathered into the whole completion they make (the first choice),
    keeping at most `limit` characters of each text (`cut` says whether any was dropped)."""

    def __init__(self, limit: int | None = None) -> None:
        self.text = TextBuffer(limit)
        self.reasoning = TextBuffer(limit)
        self.calls: dict[int, tuple[list[str], TextBuffer]] = {}  # index → ([id, name], arguments)
        self.limit = limit
        self.finish: str | None = None
        self.head: dict[str, Any] = {}
        self.usage: Any = None

    @property
    def cut(self) -> bool:
        return self.text.cut or self.reasoning.cut or any(args.cut for _, args in self.calls.values())

    def add(self, raw: Any) -> None:
        chunk = json_object(raw)
        self.head = {
            "id": chunk.get("id") or self.head.get("id"),
            "model": chunk.get("model") or self.head.get("model"),
        }
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in map(json_object, (chunk.get("choices") or [])[:1]):
            delta = json_object(choice.get("delta"))
            self.text.add(json_text(delta.get("content")))
            self.reasoning.add(_reasoning(delta))
            for part in map(json_object, delta.get("tool_calls") or []):
                names, arguments = self.calls.setdefault(
                    json_count(part.get("index")), (["", ""], TextBuffer(self.limit))
                )
                function = json_object(part.get("function"))
                names[0] = json_text(part.get("id")) or names[0]
                names[1] = json_text(function.get("name")) or names[1]
                arguments.add(json_text(function.get("arguments")))
            self.finish = json_text(choice.get("finish_reason")) or self.finish

    def completion(self) -> dict[str, Any]:
        """The completion the chunks make, as a whole answer's JSON."""
        calls = [
            {"id": ids[0], "type": "function", "function": {"name": ids[1], "arguments": args.text()}}
            for _, (ids, args) in sorted(self.calls.items())
        ]
        message = {
            "role": "assistant",
            "content": self.text.text(),
            "reasoning_content": self.reasoning.text(),
        }
        choice = {"index": 0, "message": {**message, "tool_calls": calls}, "finish_reason": self.finish}
        return {**self.head, "choices": [choice], "usage": self.usage}
