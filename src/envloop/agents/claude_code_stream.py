"""Claude Code's `--output-format stream-json` output, turned into trajectory steps as it arrives.

The stream is one JSON event per line. What is read:

- `system` / `init`: the CLI's version, model and tools (a system step);
- `stream_event` `message_start` / `message_delta` (with `--include-partial-messages`): where a model
  call begins, its input tokens, and at its end its stop reason and output tokens (the `assistant`
  events alone carry the usage as of the first token);
- `assistant`: the blocks of one model response (text, thinking, tool_use), one event per block;
- `user` with `tool_result` blocks: a tool's result; the working directory is snapshotted then, so
  each tool step carries the files changed since the previous one;
- `result`: how the run ended (success, turn limit, error) and the run's token totals.

Anything else (partial deltas, status events, unknown types) is ignored, and a line that is not
JSON is skipped: a newer CLI may add events without breaking the trajectory.

Behind the model gateway (`model_steps=False`) the gateway records every model call as it went
over the wire, so the stream gives only the system and tool steps, and the usage is the gateway's
measure, not the CLI's own totals.
"""

import re
from datetime import UTC, datetime
from typing import Any

from envloop.agents.json_values import add_content_blocks, as_count, as_object, block_text, parse_object
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
from envloop.environments.contract import Environment
from envloop.trajectories import Snapshot, changes_between

_STOPS = {"end_turn": "end", "tool_use": "tool_calls", "max_tokens": "length", "refusal": "refusal"}
_EXIT_CODE = re.compile(r"^(?:Error: )?Exit code (\d+)")


def _when(event: dict[str, Any]) -> datetime:
    stamp = event.get("timestamp")
    if isinstance(stamp, str):
        try:
            return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            pass
    return datetime.now(UTC)


class StreamTranslator:
    """Feeds stream lines into a trajectory recorder; `finish()` says how the run ended. Call
    `start()` first: it takes the working directory's state the first tool's changes are against."""

    def __init__(
        self,
        recorder: TrajectoryRecorder,
        summary: ModelRequestSummary,
        environment: Environment,
        *,
        model_steps: bool = True,
    ) -> None:
        self.recorder = recorder
        self.model_steps = model_steps
        self.summary = summary
        self.environment = environment
        self.state: Snapshot = {}
        self.messages = 1  # the instruction
        self.calls: dict[str, ToolCall] = {}
        self.pending: ModelStep | None = None
        self.result: dict[str, Any] | None = None

    async def start(self) -> None:
        self.state = await self.environment.snapshot()

    async def feed(self, line: str) -> None:
        event = parse_object(line)
        if not event:
            return
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            self._init(event)
        elif kind == "stream_event":
            self._stream_event(as_object(event.get("event")), event)
        elif kind == "assistant":
            self._assistant(event)
        elif kind == "user":
            self._flush()
            await self._tool_results(event)
        elif kind == "result":
            self._flush()
            self.result = event

    def _init(self, event: dict[str, Any]) -> None:
        tools = [t for t in event.get("tools") or [] if isinstance(t, str)]
        self.summary = self.summary.model_copy(update={"tools": tools})
        version = event.get("claude_code_version") or "?"
        text = (
            f"Claude Code {version}: model {event.get('model')}, permission mode "
            f"{event.get('permissionMode')}, working directory {event.get('cwd')}; tools: {', '.join(tools)}"
        )
        self.recorder.add(SystemStep(at=_when(event), text=text))

    def _step(self, event: dict[str, Any], message: dict[str, Any]) -> ModelStep:
        """The model step `message` belongs to, started on its first sign."""
        message_id = message.get("id") if isinstance(message.get("id"), str) else None
        if self.pending is None or (message_id and self.pending.response_id != message_id):
            self._flush()
            usage = as_object(message.get("usage"))
            self.pending = ModelStep(
                at=_when(event),
                request=self.summary.model_copy(update={"messages": self.messages}),
                served_by=message.get("model") if isinstance(message.get("model"), str) else None,
                response_id=message_id,
                usage=Usage(
                    input_tokens=as_count(usage.get("input_tokens")),
                    cache_read_tokens=as_count(usage.get("cache_read_input_tokens")),
                    output_tokens=as_count(usage.get("output_tokens")),
                ),
            )
        return self.pending

    def _stream_event(self, inner: dict[str, Any], event: dict[str, Any]) -> None:
        if inner.get("type") == "message_start":
            self._step(event, as_object(inner.get("message")))
        elif inner.get("type") == "message_delta" and self.pending is not None:
            stop = as_object(inner.get("delta")).get("stop_reason")
            self.pending.finish_reason = stop if isinstance(stop, str) else None
            self.pending.stop = _STOPS.get(self.pending.finish_reason or "", "other")
            output = as_count(as_object(inner.get("usage")).get("output_tokens"))
            self.pending.usage = self.pending.usage.model_copy(update={"output_tokens": output})

    def _assistant(self, event: dict[str, Any]) -> None:
        message = as_object(event.get("message"))
        step = self._step(event, message)
        add_content_blocks(step, message.get("content"), self.calls)

    def _flush(self) -> None:
        if self.pending is None:
            return
        step, self.pending = self.pending, None
        if step.stop is None:
            step.stop = "tool_calls" if step.tool_calls else "end"
        if self.model_steps:
            self.recorder.add(step)
        self.messages += 1

    async def _tool_results(self, event: dict[str, Any]) -> None:
        content = as_object(event.get("message")).get("content")
        results = [b for b in map(as_object, content if isinstance(content, list) else []) if b]
        results = [b for b in results if b.get("type") == "tool_result"]
        if not results:
            return
        self.messages += 1
        after = await self.environment.snapshot(self.state)
        changes, self.state = changes_between(self.state, after), after
        detail = event.get("tool_use_result")
        for number, block in enumerate(results):
            self.recorder.add(self._tool_step(event, block, detail, changes if number == 0 else []))

    def _tool_step(
        self, event: dict[str, Any], block: dict[str, Any], detail: Any, changes: list[Any]
    ) -> ToolStep:
        call_id = str(block.get("tool_use_id", ""))
        call = self.calls.get(call_id) or ToolCall(id=call_id, name="?")
        text = block_text(block.get("content"))
        failed = block.get("is_error") is True
        step = ToolStep(
            at=_when(event), call_id=call_id, tool=call.name, arguments=call.arguments, changes=changes
        )
        command = call.arguments.get("command")
        if call.name == "Bash" and isinstance(command, str):
            step.command = command
            match = _EXIT_CODE.match(text)
            step.exit_code = int(match.group(1)) if match else (None if failed else 0)
        if isinstance(detail, dict) and ("stdout" in detail or "stderr" in detail):
            step.stdout, step.stderr = str(detail.get("stdout", "")), str(detail.get("stderr", ""))
            step.timed_out = detail.get("interrupted") is True
        elif failed:
            step.error = text
        else:
            step.stdout = text
        return step

    def finish(self) -> tuple[StopReason | None, str | None]:
        """(stop reason, error) from the run's result event; the run's token totals replace the sum
        of the steps' (sub-agent calls and retries included). Without a result event: (None, None)."""
        self._flush()
        if self.result is None:
            return None, None
        result = self.result
        usage = as_object(result.get("usage"))
        if usage and self.model_steps:
            self.recorder.trajectory.usage = Usage(
                input_tokens=as_count(usage.get("input_tokens")),
                output_tokens=as_count(usage.get("output_tokens")),
                cache_read_tokens=as_count(usage.get("cache_read_input_tokens")),
                reasoning_tokens=as_count(
                    as_object(usage.get("output_tokens_details")).get("thinking_tokens")
                ),
            )
        subtype = result.get("subtype")
        if subtype == "error_max_turns" or result.get("terminal_reason") == "max_turns":
            return "max_steps", None
        message = block_text(result.get("result")) or str(subtype)
        if result.get("api_error_status") is not None:
            return "model_error", f"the model endpoint failed: {message}"
        if result.get("is_error") is True or subtype != "success":
            return None, f"Claude Code ended with {subtype}: {message}"
        return ("length" if result.get("stop_reason") == "max_tokens" else "done"), None
