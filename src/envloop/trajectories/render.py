"""A trajectory as plain text lines, for `el trial get --steps`: each step in order with its time,
what the model was sent and said, each tool call with its command, exit code, output and the files
it changed. Long texts are cut at `LINE_LIMIT` lines per block (the JSON form keeps everything)."""

import json
from collections.abc import Iterator

from envloop.core.trajectory import (
    CutStep,
    FileChange,
    ModelStep,
    ScoreStep,
    StateStep,
    Step,
    SystemStep,
    ToolStep,
    Trajectory,
    UserStep,
    VerifierStep,
)

LINE_LIMIT = 40
_INDENT = "    "


def _block(text: str, indent: str = _INDENT) -> Iterator[str]:
    lines = text.splitlines() or [""]
    for line in lines[:LINE_LIMIT]:
        yield indent + line
    if len(lines) > LINE_LIMIT:
        yield f"{indent}… {len(lines) - LINE_LIMIT} more lines (--json shows everything)"


def _seconds(ms: float | None) -> str:
    return "" if ms is None else f"  {ms / 1000:.2f} s"


def _changes(changes: list[FileChange]) -> Iterator[str]:
    for change in changes:
        size = "" if change.size is None else f" ({change.size} bytes)"
        yield f"{_INDENT}{change.change} {change.path}{size}" + ("  binary" if change.binary else "")
        if change.diff:
            yield from _block(change.diff, _INDENT * 2)
            if change.diff_truncated:
                yield f"{_INDENT * 2}… diff cut short"


def _model(step: ModelStep) -> Iterator[str]:
    usage = step.usage
    head = f"{step.request.protocol} {step.request.model}{_seconds(step.duration_ms)}"
    if step.requested_model:
        head += f" (asked for {step.requested_model})"
    head += f"  tokens in {usage.input_tokens} / out {usage.output_tokens}"
    if step.http_status is not None and step.http_status != 200:
        head += f"  HTTP {step.http_status}"
    if step.stop:
        head += f"  stop {step.stop}"
    if step.attempts > 1:
        head += f"  ({step.attempts} attempts)"
    yield head
    if step.error:
        yield from _block("error: " + step.error)
    if step.reasoning:
        yield from _block("reasoning: " + step.reasoning)
    if step.text or not (step.error or step.tool_calls):
        yield from _block(step.text)
    for call in step.tool_calls:
        yield f"{_INDENT}→ {call.name} {json.dumps(call.arguments)}  [{call.id}]"


def _tool(step: ToolStep) -> Iterator[str]:
    exit_code = "timed out" if step.timed_out else f"exit {step.exit_code}"
    if step.command is None and step.exit_code is None and not step.timed_out:
        exit_code = "no command"  # `finish`, or a tool of an agent CLI that is not a shell command
    yield f"{step.tool} [{step.call_id}]  {exit_code}{_seconds(step.duration_ms)}"
    if step.command is not None:
        yield from _block("$ " + step.command)
    if step.error:
        yield from _block("error: " + step.error)
    if step.stdout:
        yield from _block("stdout: " + step.stdout)
    if step.stderr:
        yield from _block("stderr: " + step.stderr)
    if step.output_truncated:
        yield f"{_INDENT}… output cut short"
    yield from _changes(step.changes)


def _verifier(step: VerifierStep) -> Iterator[str]:
    ended = "timed out" if step.timed_out else f"exit {step.exit_code}"
    reward = "no reward" if step.reward is None else f"reward {step.reward:g}"
    note = f" ({step.reward_note})" if step.reward_note else ""
    yield f"{reward}{note}  {ended}{_seconds(step.duration_ms)}"
    yield from _block("$ " + step.command)
    if step.dimensions:
        yield _INDENT + "dimensions " + ", ".join(f"{k}={v:g}" for k, v in step.dimensions.items())
    if step.stdout:
        yield from _block("stdout: " + step.stdout)
    if step.stderr:
        yield from _block("stderr: " + step.stderr)
    if step.output_truncated:
        yield f"{_INDENT}… output cut short"


def _body(step: Step) -> Iterator[str]:
    if isinstance(step, SystemStep | UserStep):
        yield ""
        yield from _block(step.text)
    elif isinstance(step, ModelStep):
        yield from _model(step)
    elif isinstance(step, ToolStep):
        yield from _tool(step)
    elif isinstance(step, StateStep):
        yield f"{len(step.changes)} file(s) changed" + (f"  {step.note}" if step.note else "")
        yield from _changes(step.changes)
    elif isinstance(step, ScoreStep):
        reward = "no reward" if step.reward is None else f"reward {step.reward:g}"
        yield f"{step.scorer}  {reward}  {step.explanation}"
    elif isinstance(step, VerifierStep):
        yield from _verifier(step)
    elif isinstance(step, CutStep):
        yield f"{step.steps} step(s), {step.bytes} bytes, not kept: {step.note}"


def describe_trajectory(trajectory: Trajectory) -> list[str]:
    lines = [line for step in trajectory.steps for line in describe_step(step)]
    return [*lines, describe_end(trajectory)]


def describe_step(step: Step) -> list[str]:
    """One step's lines: a heading with its position, kind and time, then its body."""
    body = list(_body(step))
    first = body[0] if body else ""
    return [f"#{step.index} {step.kind}  {step.at.strftime('%H:%M:%S.%f')[:-3]}  {first}".rstrip(), *body[1:]]


def describe_end(trajectory: Trajectory) -> str:
    """The closing line: why the loop stopped, and the tokens of the whole trajectory."""
    usage = trajectory.usage
    return f"stop {trajectory.stop_reason or '—'}  tokens in {usage.input_tokens} / out {usage.output_tokens}"
