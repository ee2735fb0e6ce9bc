"""Export to Harbor's Agent Trajectory Interchange Format (ATIF-v1.7); the mapping is documented in
`envloop.core.trajectory`. Tool results join the agent step that made the call, as ATIF wants;
a result whose call is not in the trajectory (or far behind it) becomes a system step of its own.
The conversion reads one step at a time, so a trajectory of any size streams out (`atif_chunks`)."""

import json
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from envloop.core.trajectory import (
    CutStep,
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

ATIF_VERSION = "ATIF-v1.7"
HELD_STEPS = 32
"""Agent steps waiting for their tool results while a trajectory is converted a step at a time."""


class AtifTrajectory(BaseModel):
    """The exported document, typed at its top level for the API's schema; the steps keep ATIF's own
    open shape (see `envloop.core.trajectory` for what each envloop step becomes)."""

    model_config = ConfigDict(extra="allow")

    schema_version: str = Field(description=f"always {ATIF_VERSION}")
    session_id: str = Field(description="the trial's ID")
    agent: dict[str, Any] = Field(description="name, version (the runner) and model_name")
    steps: list[dict[str, Any]] = Field(
        description="ATIF steps (source system, user or agent), numbered from 1"
    )
    final_metrics: dict[str, Any]
    extra: dict[str, Any]


TrajectoryDocument = Trajectory | AtifTrajectory | None
"""What `GET /v1/trials/{id}/steps` answers: the trajectory in either format, or null."""


def _tool_result(step: ToolStep) -> dict[str, Any]:
    content = step.stdout + (("\n" if step.stdout else "") + step.stderr if step.stderr else "")
    extra = step.model_dump(
        mode="json", include={"tool", "command", "exit_code", "timed_out", "stdout", "stderr", "error"}
    )
    extra["changes"] = [c.model_dump(mode="json", exclude_none=True) for c in step.changes]
    return {"source_call_id": step.call_id, "content": content or step.error or "", "extra": extra}


def _agent_step(step: ModelStep) -> dict[str, Any]:
    atif: dict[str, Any] = {
        "source": "agent",
        "timestamp": step.at.isoformat(),
        "model_name": step.served_by or step.request.model,
        "message": step.text,
        "metrics": {
            "prompt_tokens": step.usage.input_tokens,
            "completion_tokens": step.usage.output_tokens,
            "cached_tokens": step.usage.cache_read_tokens,
        },
        "extra": step.model_dump(
            mode="json",
            include={
                "request",
                "stop",
                "finish_reason",
                "attempts",
                "error",
                "duration_ms",
                "http_status",
                "requested_model",
                "truncated",
            },
        ),
    }
    if step.reasoning:
        atif["reasoning_content"] = step.reasoning
    if step.tool_calls:
        atif["tool_calls"] = [
            {"tool_call_id": c.id, "function_name": c.name, "arguments": c.arguments} for c in step.tool_calls
        ]
    return atif


def atif_document(trajectory: Trajectory) -> AtifTrajectory:
    """The trial's trajectory as ATIF; built from the kept (already masked) trajectory, so a secret
    masked there stays masked here."""
    return AtifTrajectory.model_validate(to_atif(trajectory))


def to_atif(trajectory: Trajectory) -> dict[str, Any]:
    steps = list(atif_steps(trajectory.steps))
    return {**_head(trajectory), "steps": steps, **_tail(trajectory, len(steps))}


def atif_chunks(head: Trajectory, steps: Iterable[Step]) -> Iterator[str]:
    """The ATIF document as JSON text, a step at a time: what the API streams for a trajectory read
    in pages (`head` is the trajectory's other fields; its own steps are not read)."""
    opening = json.dumps(_head(head))
    yield opening[:-1] + ', "steps": ['
    count = 0
    for count, step in enumerate(atif_steps(steps), start=1):
        yield ("," if count > 1 else "") + json.dumps(step)
    yield "], " + json.dumps(_tail(head, count))[1:]


def _head(trajectory: Trajectory) -> dict[str, Any]:
    return {
        "schema_version": ATIF_VERSION,
        "session_id": trajectory.trial_id,
        "agent": {"name": trajectory.agent, "version": trajectory.runner, "model_name": trajectory.model},
    }


def _tail(trajectory: Trajectory, steps: int) -> dict[str, Any]:
    usage = trajectory.usage
    return {
        "final_metrics": {
            "total_prompt_tokens": usage.input_tokens,
            "total_completion_tokens": usage.output_tokens,
            "total_cached_tokens": usage.cache_read_tokens,
            "total_steps": steps,
        },
        "extra": {"stop_reason": trajectory.stop_reason, "protocol": trajectory.protocol},
    }


def atif_steps(steps: Iterable[Step]) -> Iterator[dict[str, Any]]:
    """ATIF steps numbered from 1, one envloop step read at a time. A tool result joins the agent
    step that made the call while that step is among the last `HELD_STEPS` (results follow their
    call); a result whose call is not there becomes a system step of its own."""
    held: deque[dict[str, Any]] = deque()
    callers: dict[str, dict[str, Any]] = {}
    number = 0

    def release() -> dict[str, Any]:
        nonlocal number
        atif = held.popleft()
        for call in atif.get("tool_calls", ()):
            callers.pop(call["tool_call_id"], None)
        number += 1
        return {**atif, "step_id": number}

    for step in steps:
        if isinstance(step, ToolStep) and step.call_id in callers:
            observation = callers[step.call_id].setdefault("observation", {"results": []})
            observation["results"].append(_tool_result(step))
            continue
        if isinstance(step, SystemStep | UserStep):
            atif = {"source": step.kind, "timestamp": step.at.isoformat(), "message": step.text}
        elif isinstance(step, ModelStep):
            atif = _agent_step(step)
            callers.update({call.id: atif for call in step.tool_calls})
        else:
            atif = _system_record(step)
        held.append(atif)
        if len(held) > HELD_STEPS:
            yield release()
    while held:
        yield release()


def _system_record(step: ToolStep | StateStep | ScoreStep | VerifierStep | CutStep) -> dict[str, Any]:
    if isinstance(step, CutStep):
        message = f"{step.steps} step(s) not kept: {step.note}"
    elif isinstance(step, VerifierStep):
        reward = "no reward" if step.reward is None else f"reward {step.reward:g}"
        message = f"verifier: {reward}" + (f" ({step.reward_note})" if step.reward_note else "")
    elif isinstance(step, ScoreStep):
        reward = "no reward" if step.reward is None else f"reward {step.reward:g}"
        message = f"{step.scorer}: {reward} ({step.explanation})"
    elif isinstance(step, StateStep):
        message = f"{len(step.changes)} file(s) changed" + (f": {step.note}" if step.note else "")
    else:
        message = f"tool {step.tool} ran outside any recorded model call"
    return {
        "source": "system",
        "timestamp": step.at.isoformat(),
        "message": message,
        "extra": step.model_dump(mode="json", exclude={"index", "at"}),
    }
