"""`opencode run --format json` output, turned into trajectory steps.

One JSON event per line, each carrying a `part` of the session. `step_start` … `step_finish` bracket
exactly one model call: the `text` and `reasoning` parts between them are what the model said,
`tool_use` parts the tools it called (with their input, output and, for `bash`, exit code), and
`step_finish` its finish reason and tokens. An `error` event is the endpoint's or the CLI's failure.
Unknown events and lines that are not JSON are skipped.
"""

from datetime import UTC, datetime
from typing import Any

from envloop.agents.event_reader import EventReader
from envloop.agents.json_values import as_count, as_object, parse_object
from envloop.core.trajectory import (
    ModelRequestSummary,
    StopReason,
    ToolCall,
    ToolStep,
    TrajectoryRecorder,
    Usage,
)

_STOPS = {"tool-calls": "tool_calls", "stop": "end", "length": "length", "content-filter": "refusal"}


def _when(event: dict[str, Any]) -> datetime:
    stamp = event.get("timestamp")
    if isinstance(stamp, int | float) and not isinstance(stamp, bool):
        return datetime.fromtimestamp(stamp / 1000, UTC)
    return datetime.now(UTC)


class OpenCodeEvents(EventReader):
    """Feeds `opencode run --format json` lines into a recorder; `finish()` says how it ended."""

    def __init__(self, recorder: TrajectoryRecorder, summary: ModelRequestSummary, model_steps: bool) -> None:
        super().__init__(recorder, summary, model_steps)
        self.calls = 0
        self.last_reason: str | None = None
        self.error: str | None = None

    def feed(self, line: str) -> None:
        event = parse_object(line)
        if not event:
            return
        kind, part = event.get("type"), as_object(event.get("part"))
        if kind == "step_start":
            self.open_model_step().at = _when(event)
        elif kind in ("text", "reasoning") and self.current is not None:
            if kind == "text":
                self.current.text += str(part.get("text", ""))
            else:
                self.current.reasoning = (self.current.reasoning or "") + str(part.get("text", ""))
        elif kind == "tool_use":
            self._tool(event, part)
        elif kind == "step_finish":
            self._finish_step(part)
        elif kind == "error":
            error = as_object(event.get("error"))
            data = as_object(error.get("data"))
            self.error = str(data.get("message") or error.get("name") or "opencode reported an error")

    def _tool(self, event: dict[str, Any], part: dict[str, Any]) -> None:
        state = as_object(part.get("state"))
        arguments = as_object(state.get("input"))
        call_id, name = str(part.get("callID", "")), str(part.get("tool", ""))
        if self.current is not None:
            self.current.tool_calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
        step = ToolStep(at=_when(event), call_id=call_id, tool=name, arguments=arguments)
        metadata = as_object(state.get("metadata"))
        if name == "bash":
            step.command = str(arguments.get("command", ""))
            exit_code = metadata.get("exit")
            step.exit_code = exit_code if isinstance(exit_code, int) else None
        if state.get("status") == "error":
            step.error = str(state.get("error", "the tool failed"))
        else:
            step.stdout = str(state.get("output", ""))
        self.recorder.add(step)
        self.messages += 1

    def _finish_step(self, part: dict[str, Any]) -> None:
        self.calls += 1
        self.messages += 1
        reason = part.get("reason")
        self.last_reason = reason if isinstance(reason, str) else None
        if self.current is None:
            return
        tokens = as_object(part.get("tokens"))
        usage = Usage(
            input_tokens=as_count(tokens.get("input")),
            output_tokens=as_count(tokens.get("output")),
            reasoning_tokens=as_count(tokens.get("reasoning")),
            cache_read_tokens=as_count(as_object(tokens.get("cache")).get("read")),
        )
        self.current.usage = usage
        if self.model_steps:
            self.recorder.trajectory.usage = self.recorder.trajectory.usage + usage
        self.current.finish_reason = self.last_reason
        self.current.stop = _STOPS.get(
            self.last_reason or "", "tool_calls" if self.current.tool_calls else "other"
        )
        self.current = None

    def finish(self) -> tuple[StopReason | None, str | None]:
        """(stop reason, error): the endpoint's error; done after a model call that finished; None
        when no model call finished at all."""
        if self.error is not None:
            return "model_error", self.error
        if self.calls == 0:
            return None, None
        return ("length" if self.last_reason == "length" else "done"), None
