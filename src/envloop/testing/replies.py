"""Replies rendered in each protocol's own JSON (Chat Completions, the Responses API, Messages,
the Gemini API's GenerateContentResponse):
whole responses, server-sent event streams, errors.

Streams are cut into small pieces (text word by word, tool arguments in halves) so that clients
are tested on reassembling them, as they must against real servers.
"""

import json
import time
from collections.abc import Iterator
from typing import Any

from envloop.models.gemini_translation import gemini_response
from envloop.models.protocol_errors import error_body as protocol_error_body
from envloop.models.serving.responses_builder import ResponseBuilder, usage_object
from envloop.testing.script import Received, Reply, ReplyProtocol, input_tokens, output_tokens

_OPENAI_FINISH = {"end": "stop", "length": "length", "tool_calls": "tool_calls"}
_ANTHROPIC_STOP = {"end": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def error_body(protocol: ReplyProtocol, status: int, message: str) -> dict[str, Any]:
    return protocol_error_body("openai" if protocol == "openai-responses" else protocol, status, message)


def _call_id(reply: Reply, index: int, prefix: str) -> str:
    call = reply.tool_calls[index]
    return call.id or f"{prefix}_{index + 1}"


def _usage(received: Received, reply: Reply) -> tuple[int, int]:
    return (
        reply.input_tokens if reply.input_tokens is not None else input_tokens(received),
        reply.output_tokens if reply.output_tokens is not None else output_tokens(reply),
    )


def openai_response(received: Received, reply: Reply, response_id: str) -> dict[str, Any]:
    prompt, completion = _usage(received, reply)
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": _call_id(reply, i, "call"),
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for i, call in enumerate(reply.tool_calls)
        ]
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": received.model,
        "choices": [{"index": 0, "message": message, "finish_reason": _OPENAI_FINISH[reply.stop_reason]}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def _anthropic_blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        blocks.append({"type": "thinking", "thinking": reply.reasoning, "signature": "scripted-signature"})
    if reply.text or not reply.tool_calls:
        blocks.append({"type": "text", "text": reply.text})
    blocks += [
        {"type": "tool_use", "id": _call_id(reply, i, "toolu"), "name": call.name, "input": call.arguments}
        for i, call in enumerate(reply.tool_calls)
    ]
    return blocks


def anthropic_response(received: Received, reply: Reply, response_id: str) -> dict[str, Any]:
    prompt, completion = _usage(received, reply)
    return {
        "id": response_id,
        "type": "message",
        "role": "assistant",
        "model": received.model,
        "content": _anthropic_blocks(reply),
        "stop_reason": _ANTHROPIC_STOP[reply.stop_reason],
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": completion},
    }


_ECHOED = ("instructions", "tools", "tool_choice", "temperature", "top_p", "max_output_tokens", "metadata")


def _responses_events(
    received: Received, reply: Reply, response_id: str
) -> tuple[ResponseBuilder, list[str]]:
    """The reply built as a Responses API answer: its events (text word by word, arguments in
    halves) and the builder holding the whole response."""
    echo = {k: received.body[k] for k in _ECHOED if k in received.body}
    builder = ResponseBuilder(received.model, echo, response_id=f"resp_{response_id}")
    events = builder.start()
    if reply.reasoning is not None:
        events += builder.reasoning(_words(reply.reasoning))
    if reply.text or not reply.tool_calls:
        for piece in _words(reply.text) or [""]:
            events += builder.text(piece)
    for i, call in enumerate(reply.tool_calls):
        arguments = json.dumps(call.arguments)
        events += builder.function_call(call.name, arguments, _call_id(reply, i, "call"), _halves(arguments))
    prompt, completion = _usage(received, reply)
    events += builder.finish(usage_object(prompt, completion), cut_by_limit=reply.stop_reason == "length")
    return builder, events


def gemini_stream(received: Received, reply: Reply, response_id: str) -> Iterator[bytes]:
    """Gemini's stream: reasoning and text word by word, then the function calls whole with the
    finish reason and usage, as Google's own stream ends."""
    whole = gemini_response(openai_response(received, reply, response_id))
    candidate = whole["candidates"][0]
    head = {"modelVersion": whole["modelVersion"], "responseId": whole["responseId"]}

    def chunk(parts: list[dict[str, Any]], **last: Any) -> bytes:
        content = {"role": "model", "parts": parts}
        extra = {"finishReason": last.pop("finishReason")} if "finishReason" in last else {}
        payload = {"candidates": [{"content": content, "index": 0, **extra}], **head, **last}
        return b"data: " + json.dumps(payload).encode() + b"\r\n\r\n"

    for piece in _words(reply.reasoning or ""):
        yield chunk([{"text": piece, "thought": True}])
    for piece in _words(reply.text):
        yield chunk([{"text": piece}])
    calls = [part for part in candidate["content"]["parts"] if "functionCall" in part]
    yield chunk(
        calls or [{"text": ""}], finishReason=candidate["finishReason"], usageMetadata=whole["usageMetadata"]
    )


def response_body(
    protocol: ReplyProtocol, received: Received, reply: Reply, response_id: str
) -> dict[str, Any]:
    if protocol == "gemini":
        return gemini_response(openai_response(received, reply, response_id))
    if protocol == "anthropic":
        return anthropic_response(received, reply, response_id)
    if protocol == "openai-responses":
        return _responses_events(received, reply, response_id)[0].response()
    return openai_response(received, reply, response_id)


def _words(text: str) -> list[str]:
    pieces = text.split(" ")
    return [p + " " for p in pieces[:-1]] + [pieces[-1]] if text else []


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [text[:middle], text[middle:]]


def _sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "").encode() + f"data: {payload}\n\n".encode()


def openai_stream(received: Received, reply: Reply, response_id: str) -> Iterator[bytes]:
    head = {"id": response_id, "object": "chat.completion.chunk", "created": int(time.time())}
    head["model"] = received.model

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse({**head, "choices": [choice]})

    yield chunk({"role": "assistant", "content": ""})
    if reply.reasoning is not None:
        for piece in _words(reply.reasoning):
            yield chunk({"reasoning_content": piece})
    for piece in _words(reply.text):
        yield chunk({"content": piece})
    for i, call in enumerate(reply.tool_calls):
        start = {"index": i, "id": _call_id(reply, i, "call"), "type": "function"}
        yield chunk({"tool_calls": [{**start, "function": {"name": call.name, "arguments": ""}}]})
        for piece in _halves(json.dumps(call.arguments)):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield chunk({}, _OPENAI_FINISH[reply.stop_reason])
    options = received.body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        prompt, completion = _usage(received, reply)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        yield _sse({**head, "choices": [], "usage": usage})
    yield _sse("[DONE]")


def _anthropic_block_events(index: int, block: dict[str, Any]) -> Iterator[bytes]:
    kind = block["type"]
    if kind == "text":
        start: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in _words(block["text"])]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _words(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    else:
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        deltas = [
            {"type": "input_json_delta", "partial_json": p} for p in _halves(json.dumps(block["input"]))
        ]
    yield _sse({"type": "content_block_start", "index": index, "content_block": start}, "content_block_start")
    for delta in deltas:
        yield _sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
    yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")


def anthropic_stream(received: Received, reply: Reply, response_id: str) -> Iterator[bytes]:
    whole = anthropic_response(received, reply, response_id)
    prompt, completion = _usage(received, reply)
    start = {
        **whole,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": prompt, "output_tokens": 1},
    }
    yield _sse({"type": "message_start", "message": start}, "message_start")
    for index, block in enumerate(whole["content"]):
        yield from _anthropic_block_events(index, block)
    delta = {"stop_reason": whole["stop_reason"], "stop_sequence": None}
    yield _sse(
        {"type": "message_delta", "delta": delta, "usage": {"output_tokens": completion}}, "message_delta"
    )
    yield _sse({"type": "message_stop"}, "message_stop")


def stream_events(
    protocol: ReplyProtocol, received: Received, reply: Reply, response_id: str
) -> Iterator[bytes]:
    if protocol == "gemini":
        return gemini_stream(received, reply, response_id)
    if protocol == "anthropic":
        return anthropic_stream(received, reply, response_id)
    if protocol == "openai-responses":
        return (event.encode() for event in _responses_events(received, reply, response_id)[1])
    return openai_stream(received, reply, response_id)
