"""Gemini CLI's `--output-format stream-json` output, turned into trajectory steps.

One JSON event per line: `init` (session id, model), `message` (the user's prompt, then the
assistant's text in `delta` pieces), `tool_use` (a call: `tool_name`, `tool_id`, `parameters`),
`tool_result` (`tool_id`, `status` success or error, `output`, `error`), `error` (a warning the
CLI went on after) and a final `result` (`status`, `error`, `stats` with the run's token totals).
Gemini CLI names a call `TOOL__ID` where the model named it `ID`; the steps use the model's id, so
a tool step points at the model step's call. A model step is the assistant's text and calls
between two tool results. Unknown events and lines that are not JSON are skipped.
"""

import re
from typing import Any

from envloop.agents.event_reader import EventReader
from envloop.agents.json_values import as_count, as_object, parse_object
from envloop.core.trajectory import (
    ModelRequestSummary,
    ModelStep,
    StopReason,
    SystemStep,
    ToolCall,
    ToolStep,
    TrajectoryRecorder,
    Usage,
)

_EXIT_CODE = re.compile(r"^Exit Code: (\d+)$", re.MULTILINE)
SHELL = "run_shell_command"
"""Gemini CLI's shell tool, and Qwen Code's (a fork of Gemini CLI whose tool reports the same)."""


def shell_exit_code(output: str, failed: bool) -> int | None:
    """The exit code the shell tool's output names on an `Exit Code: N` line; without one, 0 unless
    the call failed (then unknown)."""
    match = _EXIT_CODE.search(output)
    return int(match.group(1)) if match else (None if failed else 0)


def _usage(stats: dict[str, Any]) -> Usage:
    return Usage(
        input_tokens=as_count(stats.get("input_tokens")),
        output_tokens=as_count(stats.get("output_tokens")),
        cache_read_tokens=as_count(stats.get("cached")),
    )


def model_call_id(tool_id: str, name: str) -> str:
    """The id the model gave a call, from the one Gemini CLI reports (`NAME__ID`)."""
    return tool_id.removeprefix(f"{name}__")


class GeminiEvents(EventReader):
    """Feeds stream-json lines into a recorder; `finish()` says how the run ended."""

    def __init__(self, recorder: TrajectoryRecorder, summary: ModelRequestSummary, model_steps: bool) -> None:
        super().__init__(recorder, summary, model_steps)
        self.calls: dict[str, ToolCall] = {}
        self.result: dict[str, Any] | None = None

    def feed(self, line: str) -> None:
        event = parse_object(line)
        kind = event.get("type")
        if kind == "init":
            text = f"Gemini CLI: model {event.get('model')}, session {event.get('session_id')}"
            self.recorder.add(SystemStep(text=text))
        elif kind == "message" and event.get("role") == "assistant":
            self._model_step().text += str(event.get("content") or "")
        elif kind == "tool_use":
            self._tool_use(event)
        elif kind == "tool_result":
            self._tool_result(event)
        elif kind == "error":
            self.recorder.add(
                SystemStep(text=f"Gemini CLI: {event.get('severity', 'error')}: {event.get('message')}")
            )
        elif kind == "result":
            self.result = event

    def _model_step(self) -> ModelStep:
        step = self.current
        if step is None:
            step = self.open_model_step(stop="end")
            self.messages += 1
        return step

    def _tool_use(self, event: dict[str, Any]) -> None:
        name = str(event.get("tool_name") or "?")
        call = ToolCall(
            id=model_call_id(str(event.get("tool_id") or ""), name),
            name=name,
            arguments=as_object(event.get("parameters")),
        )
        self.calls[call.id] = call
        step = self._model_step()
        step.tool_calls.append(call)
        step.stop = "tool_calls"

    def _tool_result(self, event: dict[str, Any]) -> None:
        if self.current is not None:
            self.current = None
            self.messages += 1
        tool_id = str(event.get("tool_id") or "")
        call = next(
            (c for i, c in self.calls.items() if tool_id in (i, f"{c.name}__{i}")),
            ToolCall(id=tool_id, name="?"),
        )
        step = ToolStep(call_id=call.id, tool=call.name, arguments=call.arguments)
        output = str(event.get("output") or "")
        error = as_object(event.get("error"))
        failed = event.get("status") == "error"
        if call.name == SHELL:
            step.command = str(call.arguments.get("command", ""))
            step.exit_code = shell_exit_code(output, failed)
        step.stdout = output
        if failed:
            step.error = str(error.get("message") or output or "the tool failed")
        self.recorder.add(step)

    def finish(self) -> tuple[StopReason | None, str | None]:
        """(stop reason, error) from the `result` event; (None, None) without one."""
        if self.result is None:
            return None, None
        result = self.result
        stats = as_object(result.get("stats"))
        if self.model_steps and stats:
            self.recorder.trajectory.usage = _usage(stats)
        if result.get("status") == "success":
            return "done", None
        error = as_object(result.get("error"))
        message = str(error.get("message") or result.get("status"))
        if "turn" in str(error.get("type", "")).lower() or "max session turns" in message.lower():
            return "max_steps", None
        return "model_error", f"Gemini CLI ended with {result.get('status')}: {message}"
