"""One OpenAI Responses API answer, built piece by piece: the server-sent events a streamed request
gets, and the response object a whole one gets, from the same calls.

`el model serve` feeds it the engine's pieces, the scripted endpoint a script's reply; both then
answer in the same order of events, with the same item ids and sequence numbers, which the
official SDK's stream helper checks strictly (an item is added before its deltas, closed before the
response completes, and the response's id never changes).

    builder = ResponseBuilder(model, echo)
    events = builder.start() + builder.text("Hel") + builder.text("lo") + builder.finish(usage)
    builder.response()                      # the object `response.completed` carried

Text opens a message item (one `output_text` part) that stays open until something else is added;
reasoning and function calls are items of their own. A response cut by the output limit ends as
`response.incomplete` (reason `max_output_tokens`) instead of `response.completed`.
"""

import json
import time
import uuid
from typing import Any, Literal

ResponseStatus = Literal["in_progress", "completed", "incomplete", "failed"]


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def usage_object(input_tokens: int, output_tokens: int, reasoning_tokens: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": input_tokens + output_tokens,
    }


def sse(data: dict[str, Any]) -> str:
    """One event, named after its `type` as the protocol's streams are."""
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"


class ResponseBuilder:
    """`echo` holds the request's settings a response repeats (instructions, tools, tool_choice,
    temperature, top_p, max_output_tokens, parallel_tool_calls, metadata...)."""

    def __init__(self, model: str, echo: dict[str, Any], response_id: str | None = None) -> None:
        self.id = response_id or _id("resp")
        self.model = model
        self.echo = echo
        self.created_at = int(time.time())
        self.output: list[dict[str, Any]] = []
        self.status: ResponseStatus = "in_progress"
        self.usage: dict[str, Any] | None = None
        self.incomplete_reason: str | None = None
        self.error: dict[str, Any] | None = None
        self._sequence = 0
        self._open_message: dict[str, Any] | None = None

    def _event(self, kind: str, **fields: Any) -> str:
        event = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return sse(event)

    def response(self) -> dict[str, Any]:
        echo = self.echo
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": self.status,
            "error": self.error,
            "incomplete_details": {"reason": self.incomplete_reason} if self.incomplete_reason else None,
            "instructions": echo.get("instructions"),
            "max_output_tokens": echo.get("max_output_tokens"),
            "model": self.model,
            "output": list(self.output),
            "parallel_tool_calls": echo.get("parallel_tool_calls", True),
            "previous_response_id": None,
            "reasoning": echo.get("reasoning") or {"effort": None, "summary": None},
            "store": False,
            "temperature": echo.get("temperature", 1.0),
            "text": {"format": {"type": "text"}},
            "tool_choice": echo.get("tool_choice") or "auto",
            "tools": echo.get("tools") or [],
            "top_p": echo.get("top_p", 1.0),
            "truncation": "disabled",
            "usage": self.usage,
            "metadata": echo.get("metadata") or {},
        }

    def start(self) -> list[str]:
        """`response.created` and `response.in_progress`: the stream's first two events."""
        return [
            self._event("response.created", response=self.response()),
            self._event("response.in_progress", response=self.response()),
        ]

    def keep_alive(self) -> str:
        """`response.in_progress` again: a real event, so a client that times out a silent stream
        (counting events, not bytes) keeps waiting while the model reads a long prompt."""
        return self._event("response.in_progress", response=self.response())

    def _close_message(self) -> list[str]:
        message = self._open_message
        if message is None:
            return []
        self._open_message = None
        index = self.output.index(message)
        part = message["content"][0]
        message["status"] = "completed"
        where = {"item_id": message["id"], "output_index": index, "content_index": 0}
        return [
            self._event("response.output_text.done", **where, text=part["text"], logprobs=[]),
            self._event("response.content_part.done", **where, part=part),
            self._event("response.output_item.done", output_index=index, item=message),
        ]

    def text(self, piece: str) -> list[str]:
        events: list[str] = []
        message = self._open_message
        if message is None:
            message = {"id": _id("msg"), "type": "message", "status": "in_progress", "role": "assistant"}
            message["content"] = []
            self.output.append(message)
            self._open_message = message
            index = len(self.output) - 1
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            events.append(self._event("response.output_item.added", output_index=index, item=message))
            message["content"].append(part)
            where = {"item_id": message["id"], "output_index": index, "content_index": 0}
            events.append(self._event("response.content_part.added", **where, part=part))
        message["content"][0]["text"] += piece
        if piece:
            events.append(
                self._event(
                    "response.output_text.delta",
                    item_id=message["id"],
                    output_index=self.output.index(message),
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            )
        return events

    def reasoning(self, pieces: list[str]) -> list[str]:
        """A reasoning item whose summary is the reasoning text, streamed in `pieces`. (Events are
        serialized when made, so items are updated in place afterwards.)"""
        events = self._close_message()
        item: dict[str, Any] = {"id": _id("rs"), "type": "reasoning", "summary": [], "status": "in_progress"}
        self.output.append(item)
        index = len(self.output) - 1
        where = {"item_id": item["id"], "output_index": index, "summary_index": 0}
        events.append(self._event("response.output_item.added", output_index=index, item=item))
        empty = {"type": "summary_text", "text": ""}
        events.append(self._event("response.reasoning_summary_part.added", **where, part=empty))
        events += [self._event("response.reasoning_summary_text.delta", **where, delta=p) for p in pieces]
        part = {"type": "summary_text", "text": "".join(pieces)}
        events.append(self._event("response.reasoning_summary_text.done", **where, text=part["text"]))
        events.append(self._event("response.reasoning_summary_part.done", **where, part=part))
        item.update(summary=[part], status="completed")
        events.append(self._event("response.output_item.done", output_index=index, item=item))
        return events

    def function_call(
        self, name: str, arguments: str, call_id: str | None = None, pieces: list[str] | None = None
    ) -> list[str]:
        """A `function_call` item; its arguments stream in `pieces` (whole when not given)."""
        events = self._close_message()
        item: dict[str, Any] = {
            "id": _id("fc"),
            "type": "function_call",
            "status": "in_progress",
            "call_id": call_id or _id("call"),
            "name": name,
            "arguments": "",
        }
        self.output.append(item)
        index = len(self.output) - 1
        events.append(self._event("response.output_item.added", output_index=index, item=item))
        where = {"item_id": item["id"], "output_index": index}
        for piece in pieces if pieces is not None else [arguments]:
            events.append(self._event("response.function_call_arguments.delta", **where, delta=piece))
        item.update(arguments=arguments, status="completed")
        events.append(
            self._event("response.function_call_arguments.done", **where, name=name, arguments=arguments)
        )
        events.append(self._event("response.output_item.done", output_index=index, item=item))
        return events

    def finish(self, usage: dict[str, Any], cut_by_limit: bool = False) -> list[str]:
        """Close what is open and end the response: `response.completed`, or `response.incomplete`
        when the output limit cut it."""
        events = self._close_message()
        self.usage = usage
        if cut_by_limit:
            self.status, self.incomplete_reason = "incomplete", "max_output_tokens"
            events.append(self._event("response.incomplete", response=self.response()))
        else:
            self.status = "completed"
            events.append(self._event("response.completed", response=self.response()))
        return events

    def fail(self, code: str, message: str) -> list[str]:
        """A failure after the stream started: `response.failed` carrying the error."""
        self.status, self.error = "failed", {"code": code, "message": message}
        return [self._event("response.failed", response=self.response())]
