"""Reading values out of an agent CLI's JSON output, which envloop does not control: a field of
the wrong type reads as empty, never as an exception in the middle of a trajectory."""

import json
from typing import Any

from envloop.core.trajectory import ModelStep, ToolCall


def parse_object(text: str | bytes) -> dict[str, Any]:
    """A JSON object from a line or file the CLI wrote; anything else (not JSON, not an object,
    not UTF-8) reads as empty."""
    try:
        return as_object(json.loads(text))
    except ValueError:
        return {}


def as_object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_count(value: Any) -> int:
    """A token count: a whole number, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def block_text(value: Any) -> str:
    """A message's or tool result's content: a string, or the text of its `text` blocks."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            str(b.get("text", "")) for b in value if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def add_content_blocks(step: ModelStep, content: Any, calls: dict[str, ToolCall]) -> None:
    """A Messages-shaped response's content blocks (Claude Code's stream, and Qwen Code's in the
    same shape) added to `step`: text, thinking, and tool calls, each call also kept by its id in
    `calls` so its result can find it."""
    for block in map(as_object, content if isinstance(content, list) else []):
        if block.get("type") == "text":
            step.text += str(block.get("text", ""))
        elif block.get("type") == "thinking":
            step.reasoning = (step.reasoning or "") + str(block.get("thinking", ""))
        elif block.get("type") == "tool_use":
            call = ToolCall(
                id=str(block.get("id", "")),
                name=str(block.get("name", "")),
                arguments=as_object(block.get("input")),
            )
            step.tool_calls.append(call)
            calls[call.id] = call
