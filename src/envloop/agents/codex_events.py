"""`codex exec --json` output, turned into trajectory steps.

One JSON event per line. What is read:

- `item.completed` items: `reasoning` and `agent_message` (what the model said), `command_execution`
  (a shell command: its command line, output and exit code), `file_change` (files the model's patch
  tool wrote), `mcp_tool_call` (a call to one of the task's MCP servers), `web_search`;
- `turn.completed`: the run's token totals; `turn.failed` and `error`: why the run failed.

A model step is inferred from the items: what the model said, followed by the tools it called, until
it speaks again after their results (the stream does not mark where one model call ends). Only
recorded when the gateway does not record the calls themselves. Unknown events and lines that are
not JSON are skipped, so a newer CLI does not break the trajectory.
"""

import json
from typing import Any

from envloop.agents.event_reader import EventReader
from envloop.agents.json_values import as_count, as_object, parse_object
from envloop.core.trajectory import (
    ModelRequestSummary,
    ModelStep,
    StopReason,
    ToolCall,
    ToolStep,
    TrajectoryRecorder,
    Usage,
)

_TOOLS = {"command_execution", "file_change", "mcp_tool_call", "web_search"}


class CodexEvents(EventReader):
    """Feeds `codex exec --json` lines into a recorder; `finish()` says how the run ended."""

    def __init__(self, recorder: TrajectoryRecorder, summary: ModelRequestSummary, model_steps: bool) -> None:
        super().__init__(recorder, summary, model_steps)
        self.after_tools = False
        self.usage: Usage | None = None
        self.error: str | None = None

    def feed(self, line: str) -> None:
        event = parse_object(line)
        if not event:
            return
        kind = event.get("type")
        if kind == "item.completed":
            self._item(as_object(event.get("item")))
        elif kind == "turn.completed":
            usage = as_object(event.get("usage"))
            self.usage = Usage(
                input_tokens=as_count(usage.get("input_tokens")),
                cache_read_tokens=as_count(usage.get("cached_input_tokens")),
                output_tokens=as_count(usage.get("output_tokens")),
                reasoning_tokens=as_count(usage.get("reasoning_output_tokens")),
            )
        elif kind == "turn.failed":
            self.error = str(as_object(event.get("error")).get("message") or "the turn failed")
        elif kind == "error" and isinstance(event.get("message"), str):
            self.error = event["message"]

    def _model(self, speaking: bool) -> ModelStep:
        """The model step an item belongs to: a new one when the model speaks after tool results
        (or before anything), the current one for its tool calls."""
        step = self.current
        if step is None or (speaking and self.after_tools):
            self.after_tools = False
            step = self.open_model_step(stop="end")
            self.messages += 1
        return step

    def _item(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind == "agent_message":
            step = self._model(speaking=True)
            step.text += str(item.get("text", ""))
        elif kind == "reasoning":
            step = self._model(speaking=True)
            step.reasoning = (step.reasoning or "") + str(item.get("text", ""))
        elif kind in _TOOLS:
            self._tool(item)

    def _tool(self, item: dict[str, Any]) -> None:
        kind = str(item.get("type"))
        call_id = str(item.get("id", ""))
        arguments: dict[str, Any] = {}
        step = ToolStep(call_id=call_id, tool=kind)
        if kind == "command_execution":
            step.command = str(item.get("command", ""))
            step.stdout = str(item.get("aggregated_output", ""))
            exit_code = item.get("exit_code")
            step.exit_code = exit_code if isinstance(exit_code, int) else None
            arguments = {"command": step.command}
        elif kind == "file_change":
            changes = [as_object(c) for c in item.get("changes") or []]
            arguments = {"changes": [{"path": c.get("path"), "kind": c.get("kind")} for c in changes]}
            step.stdout = "".join(f"{c.get('kind')} {c.get('path')}\n" for c in changes)
        elif kind == "mcp_tool_call":
            step.tool = f"mcp:{item.get('server')}/{item.get('tool')}"
            arguments = as_object(item.get("arguments"))
            step.stdout = json.dumps(item.get("result")) if item.get("result") is not None else ""
            if item.get("error") is not None:
                step.error = str(as_object(item.get("error")).get("message") or item.get("error"))
        elif kind == "web_search":
            arguments = {"query": item.get("query")}
        if (
            item.get("status") in ("failed", "declined")
            and step.error is None
            and kind != "command_execution"
        ):
            step.error = f"{kind} {item.get('status')}"
        step.arguments = arguments
        model = self._model(speaking=False)
        model.tool_calls.append(ToolCall(id=call_id, name=step.tool, arguments=arguments))
        model.stop = "tool_calls"
        self.after_tools = True
        self.recorder.add(step)
        self.messages += 1

    def finish(self) -> tuple[StopReason | None, str | None]:
        """(stop reason, error): done when the turn completed, the error when it failed; the CLI's
        token totals become the trajectory's when model steps are recorded here."""
        if self.usage is not None and self.model_steps:
            self.recorder.trajectory.usage = self.usage
        if self.error is not None:
            return "model_error", self.error
        return ("done", None) if self.usage is not None else (None, None)
