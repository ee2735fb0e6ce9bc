"""Qwen Code's `--output-format stream-json` output, turned into trajectory steps.

One JSON event per line, in the shape of Claude Code's stream: `system`/`init` (version, model,
tools), `assistant` events each carrying one block of a model response (text, thinking, tool_use;
the last one of a response carries its usage), `user` events with `tool_result` blocks, and a final
`result` with the run's totals or its error. A model step is every `assistant` event between two
tool results (Qwen Code gives each block its own message id). Unknown events and lines that are not
JSON are skipped.
"""

from typing import Any

from envloop.agents.event_reader import EventReader
from envloop.agents.gemini_events import SHELL, shell_exit_code
from envloop.agents.json_values import add_content_blocks, as_count, as_object, block_text, parse_object
from envloop.core.trajectory import (
    ModelRequestSummary,
    StopReason,
    SystemStep,
    ToolCall,
    ToolStep,
    TrajectoryRecorder,
    Usage,
)


def _usage(usage: dict[str, Any]) -> Usage:
    return Usage(
        input_tokens=as_count(usage.get("input_tokens")),
        output_tokens=as_count(usage.get("output_tokens")),
        cache_read_tokens=as_count(usage.get("cache_read_input_tokens")),
    )


class QwenEvents(EventReader):
    """Feeds stream-json lines into a recorder; `finish()` says how the run ended."""

    def __init__(self, recorder: TrajectoryRecorder, summary: ModelRequestSummary, model_steps: bool) -> None:
        super().__init__(recorder, summary, model_steps)
        self.calls: dict[str, ToolCall] = {}
        self.result: dict[str, Any] | None = None

    def feed(self, line: str) -> None:
        event = parse_object(line)
        if not event:
            return
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            tools = [t for t in event.get("tools") or [] if isinstance(t, str)]
            self.summary = self.summary.model_copy(update={"tools": tools})
            text = f"Qwen Code: model {event.get('model')}, permission mode {event.get('permission_mode')}"
            self.recorder.add(SystemStep(text=f"{text}; tools: {', '.join(tools)}"))
        elif kind == "assistant":
            self._assistant(as_object(event.get("message")))
        elif kind == "user":
            self._results(as_object(event.get("message")))
        elif kind == "result":
            self.result = event

    def _assistant(self, message: dict[str, Any]) -> None:
        step = self.current
        if step is None:
            step = self.open_model_step()
            self.messages += 1
        usage = _usage(as_object(message.get("usage")))
        if usage.input_tokens or usage.output_tokens:
            if self.model_steps:
                self.recorder.trajectory.usage = self.recorder.trajectory.usage + usage
            step.usage = step.usage + usage
        if isinstance(message.get("model"), str):
            step.served_by = message["model"]
        add_content_blocks(step, message.get("content"), self.calls)
        step.stop = "tool_calls" if step.tool_calls else "end"

    def _results(self, message: dict[str, Any]) -> None:
        content = message.get("content")
        blocks = [
            b
            for b in map(as_object, content if isinstance(content, list) else [])
            if b.get("type") == "tool_result"
        ]
        if not blocks:
            return
        self.current = None
        self.messages += 1
        for block in blocks:
            call_id = str(block.get("tool_use_id", ""))
            call = self.calls.get(call_id) or ToolCall(id=call_id, name="?")
            text = block_text(block.get("content"))
            step = ToolStep(call_id=call_id, tool=call.name, arguments=call.arguments)
            if call.name == SHELL:
                step.command = str(call.arguments.get("command", ""))
                step.exit_code = shell_exit_code(text, block.get("is_error") is True)
            if block.get("is_error") is True:
                step.error = text
            else:
                step.stdout = text
            self.recorder.add(step)

    def finish(self) -> tuple[StopReason | None, str | None]:
        """(stop reason, error) from the `result` event; (None, None) without one."""
        if self.result is None:
            return None, None
        result = self.result
        if self.model_steps and as_object(result.get("usage")):
            self.recorder.trajectory.usage = _usage(as_object(result.get("usage")))
        subtype = str(result.get("subtype"))
        if "max_turns" in subtype or "max_session_turns" in subtype:
            return "max_steps", None
        if result.get("is_error") is True or subtype != "success":
            message = block_text(result.get("result")) or str(
                as_object(result.get("error")).get("message") or subtype
            )
            return "model_error", f"Qwen Code ended with {subtype}: {message}"
        return "done", None
