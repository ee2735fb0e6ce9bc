"""What a model step records of one call through the gateway: a summary of what was asked, and the
answer read from the whole response or gathered from the stream's events (text, reasoning, tool
calls, stop reason, usage), each text kept up to a limit so a long stream never sits in memory.

Usage comes from where each protocol puts it: a whole response's `usage`; a Chat Completions
stream's last chunk (the gateway asks for it); the Responses API's `response.completed` (or
`.incomplete`, `.failed`); Messages' `message_start` and `message_delta`.
"""

import json
from typing import Any, Protocol

from envloop.core.trajectory import ModelRequestSummary, ToolCall, Usage
from envloop.gateway.routes import Route
from envloop.gateway.upstream import Upstream
from envloop.models.anthropic_format import message_response
from envloop.models.base import TextBuffer, json_count, json_object, json_text
from envloop.models.openai_format import ChatChunks, completion_response, parse_tool_call
from envloop.models.types import Message, ModelResponse, ResponseStop

_PARAMS = (
    "stream",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "temperature",
    "top_p",
    "seed",
    "stop",
    "stop_sequences",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning_effort",
    "reasoning",
    "thinking",
    "output_config",
)
_PARAM_LIMIT = 200
_TOOLS_LIMIT = 200
_SYSTEM_ROLES = ("system", "developer")
_INCOMPLETE: dict[str, ResponseStop] = {"max_output_tokens": "length", "content_filter": "refusal"}


def _tool_name(tool: Any) -> str:
    tool = json_object(tool)
    name = json_text(tool.get("name")) or json_text(json_object(tool.get("function")).get("name"))
    return (name or json_text(tool.get("type")) or "?")[:64]


def request_summary(
    route: Route, upstream: Upstream, body: dict[str, Any], model: str
) -> ModelRequestSummary:
    """Endpoint, model sent, conversation length, tools offered and the settings asked for (each
    kept only when short): never the conversation itself, which every call repeats."""
    given = body.get("input") if route.api == "responses" else body.get("messages")
    turns = [given] if isinstance(given, str) else given if isinstance(given, list) else []
    messages = sum(1 for m in turns if json_object(m).get("role") not in _SYSTEM_ROLES)
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    params = {
        name: body[name]
        for name in _PARAMS
        if name in body and len(json.dumps(body[name], default=str)) <= _PARAM_LIMIT
    }
    return ModelRequestSummary(
        protocol=upstream.protocol if route.api != "responses" else "openai-responses",
        endpoint=upstream.url(route.upstream_path(upstream.protocol)),
        model=model,
        messages=messages,
        tools=[_tool_name(t) for t in (tools or [])[:_TOOLS_LIMIT]],
        params=params,
    )


class Recorder(Protocol):
    """Reads one answer: `whole` for a JSON body, `event` for each event of a stream (its data as
    JSON, or as text when it is not JSON). `ended` says whether a stream sent its last event: a
    stream whose connection closes before that broke off, though HTTP cannot tell."""

    stream_error: str | None
    ended: bool

    def whole(self, data: Any) -> None: ...

    def event(self, name: str | None, data: Any) -> None: ...

    def response(self) -> ModelResponse | None:
        """The answer read, or None when there was none to read."""
        ...

    @property
    def cut(self) -> bool: ...


def _error_message(data: Any) -> str | None:
    """The message of an error object a stream carried, whichever shape it came in."""
    error = json_object(data).get("error")
    if isinstance(error, dict):
        return json_text(error.get("message")) or json.dumps(error)[:500]
    return None


class ChatRecorder:
    def __init__(self, limit: int) -> None:
        self._chunks = ChatChunks(limit)
        self._whole: ModelResponse | None = None
        self._seen = False
        self.stream_error: str | None = None
        self.ended = False

    @property
    def cut(self) -> bool:
        return self._chunks.cut

    def whole(self, data: Any) -> None:
        self._whole = completion_response(data)

    def event(self, name: str | None, data: Any) -> None:
        self.stream_error = _error_message(data) or self.stream_error
        self.ended = self.ended or data == "[DONE]" or self.stream_error is not None
        if isinstance(data, dict) and "choices" in data:
            self._seen = True
            self._chunks.add(data)

    def response(self) -> ModelResponse | None:
        if self._whole is not None or not self._seen:
            return self._whole
        return completion_response(self._chunks.completion())


def _responses_answer(
    text: str, reasoning: str, calls: list[ToolCall], response: dict[str, Any], refused: bool
) -> ModelResponse:
    """The answer of a Responses API response object (its output already read)."""
    status = json_text(response.get("status"))
    reason = json_text(json_object(response.get("incomplete_details")).get("reason"))
    stop: ResponseStop = "tool_calls" if calls else "end"
    if refused:
        stop = "refusal"
    elif status == "incomplete":
        stop = _INCOMPLETE.get(reason, "other")
    elif status not in ("completed", ""):
        stop = "other"
    usage = json_object(response.get("usage"))
    return ModelResponse(
        text=text,
        reasoning=reasoning or None,
        tool_calls=calls,
        stop=stop,
        finish_reason=f"{status}: {reason}" if reason else status or None,
        usage=Usage(
            input_tokens=json_count(usage.get("input_tokens")),
            output_tokens=json_count(usage.get("output_tokens")),
            cache_read_tokens=json_count(json_object(usage.get("input_tokens_details")).get("cached_tokens")),
            reasoning_tokens=json_count(
                json_object(usage.get("output_tokens_details")).get("reasoning_tokens")
            ),
        ),
        model=json_text(response.get("model")) or None,
        response_id=json_text(response.get("id")) or None,
        message=Message(role="assistant", content=text, tool_calls=calls),
    )


def _output_call(item: dict[str, Any], arguments: str) -> ToolCall:
    """A tool call among a response's output items: a function call, a custom tool's call (its
    input is free text), or a built-in tool's call (recorded under its item type)."""
    call_id = json_text(item.get("call_id")) or json_text(item.get("id"))
    kind = json_text(item.get("type"))
    if kind == "function_call":
        return parse_tool_call(call_id, json_text(item.get("name")), arguments)
    if kind == "custom_tool_call":
        return ToolCall(id=call_id, name=json_text(item.get("name")), arguments={"input": arguments})
    rest = {k: v for k, v in item.items() if k not in ("id", "type", "status", "call_id")}
    return ToolCall(id=call_id, name=kind, arguments=rest)


def _is_call(item: dict[str, Any]) -> bool:
    kind = json_text(item.get("type"))
    return kind.endswith("_call") and kind != "function_call_output"


def _item_arguments(item: dict[str, Any]) -> str:
    return json_text(item.get("arguments")) or json_text(item.get("input"))


class ResponsesRecorder:
    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._text = TextBuffer(limit)
        self._reasoning = TextBuffer(limit)
        self._calls: dict[int, tuple[dict[str, Any], TextBuffer]] = {}
        self._refused = False
        self._final: dict[str, Any] = {}
        self._whole: ModelResponse | None = None
        self._items_seen = False
        self.stream_error: str | None = None
        self.ended = False

    @property
    def cut(self) -> bool:
        return self._text.cut or self._reasoning.cut or any(a.cut for _, a in self._calls.values())

    def whole(self, data: Any) -> None:
        response = json_object(data)
        for item in map(json_object, response.get("output") or []):
            self._item(item, len(self._calls))
        self._final = response
        self._whole = self.response()

    def _item(self, item: dict[str, Any], index: int) -> None:
        """Read a whole output item (from a whole response, or a stream's item done)."""
        kind = item.get("type")
        if kind == "message":
            for part in map(json_object, item.get("content") or []):
                self._text.add(json_text(part.get("text")) or json_text(part.get("refusal")))
                self._refused = self._refused or part.get("type") == "refusal"
        elif kind == "reasoning":
            for part in map(json_object, [*(item.get("summary") or []), *(item.get("content") or [])]):
                self._reasoning.add(json_text(part.get("text")))
        elif _is_call(item):
            arguments = TextBuffer(self._limit)
            arguments.add(_item_arguments(item))
            self._calls[index] = (item, arguments)

    def event(self, name: str | None, data: Any) -> None:
        event = json_object(data)
        kind = json_text(event.get("type")) or name or ""
        index = json_count(event.get("output_index"))
        if kind == "response.output_text.delta":
            self._text.add(json_text(event.get("delta")))
        elif kind == "response.refusal.delta":
            self._refused = True
            self._text.add(json_text(event.get("delta")))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            self._reasoning.add(json_text(event.get("delta")))
        elif kind == "response.output_item.added":
            self._items_seen = True
            item = json_object(event.get("item"))
            if _is_call(item):
                self._calls[index] = (item, TextBuffer(self._limit))
        elif kind in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            if index in self._calls:
                self._calls[index][1].add(json_text(event.get("delta")))
        elif kind == "response.output_item.done":
            item = json_object(event.get("item"))
            if _is_call(item) and (index not in self._calls or not self._calls[index][1].text()):
                self._item(item, index)  # a call whose arguments came whole, not in deltas
            elif _is_call(item):
                self._calls[index] = (item, self._calls[index][1])
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self.ended = True
            final = json_object(event.get("response"))
            if not self._items_seen:  # a server that sends the whole response only at the end
                self.whole(final)
            self._final = final
            self.stream_error = _error_message(final) or self.stream_error
        elif kind == "error":
            self.ended = True
            self.stream_error = json_text(event.get("message")) or _error_message(event) or "error event"

    def response(self) -> ModelResponse | None:
        if self._whole is not None:
            return self._whole
        if not self._final and not self._items_seen:
            return None
        calls = [_output_call(item, arguments.text()) for _, (item, arguments) in sorted(self._calls.items())]
        return _responses_answer(self._text.text(), self._reasoning.text(), calls, self._final, self._refused)


class MessagesRecorder:
    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._head: dict[str, Any] = {}
        self._usage: dict[str, Any] = {}
        self._blocks: dict[int, tuple[dict[str, Any], TextBuffer]] = {}
        self._stop: str | None = None
        self._whole: ModelResponse | None = None
        self.stream_error: str | None = None
        self.ended = False

    @property
    def cut(self) -> bool:
        return any(text.cut for _, text in self._blocks.values())

    def whole(self, data: Any) -> None:
        self._whole = message_response(data)

    def event(self, name: str | None, data: Any) -> None:
        event = json_object(data)
        kind = json_text(event.get("type")) or name or ""
        if kind == "message_start":
            message = json_object(event.get("message"))
            self._head = {"id": message.get("id"), "model": message.get("model")}
            self._usage.update(json_object(message.get("usage")))
        elif kind == "content_block_start":
            block = json_object(event.get("content_block"))
            text = TextBuffer(self._limit)
            text.add(json_text(block.get("text")) or json_text(block.get("thinking")))
            self._blocks[json_count(event.get("index"))] = (block, text)
        elif kind == "content_block_delta" and json_count(event.get("index")) in self._blocks:
            delta = json_object(event.get("delta"))
            piece = delta.get("text") or delta.get("thinking") or delta.get("partial_json")
            self._blocks[json_count(event.get("index"))][1].add(json_text(piece))
        elif kind == "message_delta":
            self._stop = json_text(json_object(event.get("delta")).get("stop_reason")) or self._stop
            usage = json_object(event.get("usage"))
            self._usage.update({k: v for k, v in usage.items() if v is not None})
        elif kind == "message_stop":
            self.ended = True
        elif kind == "error":
            self.ended = True
            self.stream_error = _error_message(event) or "error event"

    def _block(self, block: dict[str, Any], text: TextBuffer) -> dict[str, Any]:
        kind = block.get("type")
        if kind == "text":
            return {"type": "text", "text": text.text()}
        if kind == "thinking":
            return {"type": "thinking", "thinking": text.text()}
        if kind == "tool_use":
            raw = text.text()
            try:
                arguments = json.loads(raw) if raw.strip() else {}
            except ValueError:
                arguments = raw
            return {"type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": arguments}
        return block

    def response(self) -> ModelResponse | None:
        if self._whole is not None or not self._head:
            return self._whole
        content = [self._block(block, text) for _, (block, text) in sorted(self._blocks.items())]
        message = {**self._head, "content": content, "stop_reason": self._stop, "usage": self._usage}
        return message_response(message)


def recorder_for(route: Route, limit: int) -> Recorder:
    if route.api == "responses":
        return ResponsesRecorder(limit)
    if route.api == "messages":
        return MessagesRecorder(limit)
    return ChatRecorder(limit)


def capped(response: ModelResponse, limit: int) -> tuple[ModelResponse, bool]:
    """The answer with its texts and each tool call's arguments cut to `limit` characters (a whole
    body is read at once, then cut; a stream's recorders cut as they go)."""
    cut = False

    def keep(text: str) -> str:
        nonlocal cut
        cut = cut or len(text) > limit
        return text[:limit]

    calls = []
    for call in response.tool_calls:
        raw = call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)
        if len(raw) <= limit:
            calls.append(call)
            continue
        cut = True
        message = f"cut to its first {limit} characters when recorded"
        calls.append(ToolCall(id=call.id, name=call.name, raw_arguments=raw[:limit], arguments_error=message))
    text, reasoning = keep(response.text), keep(response.reasoning or "") or None
    return response.model_copy(update={"text": text, "reasoning": reasoning, "tool_calls": calls}), cut
