"""Export to Harbor's Agent Trajectory Interchange Format (ATIF-v1.7); the mapping is documented in
`envloop.core.trajectory`. Tool results join the agent step that made the call, as ATIF wants;
a result whose call is not in the trajectory becomes a system step of its own."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from envloop.core.trajectory import (
    ModelStep,
    ScoreStep,
    StateStep,
    SystemStep,
    ToolStep,
    Trajectory,
    UserStep,
    VerifierStep,
)

ATIF_VERSION = "ATIF-v1.7"


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
    steps: list[dict[str, Any]] = []
    callers: dict[str, dict[str, Any]] = {}
    for step in trajectory.steps:
        if isinstance(step, SystemStep | UserStep):
            steps.append({"source": step.kind, "timestamp": step.at.isoformat(), "message": step.text})
        elif isinstance(step, ModelStep):
            atif = _agent_step(step)
            steps.append(atif)
            callers.update({call.id: atif for call in step.tool_calls})
        elif isinstance(step, ToolStep) and step.call_id in callers:
            observation = callers[step.call_id].setdefault("observation", {"results": []})
            observation["results"].append(_tool_result(step))
        else:
            steps.append(_system_record(step))
    for number, atif in enumerate(steps, start=1):
        atif["step_id"] = number
    usage = trajectory.usage
    return {
        "schema_version": ATIF_VERSION,
        "session_id": trajectory.trial_id,
        "agent": {"name": trajectory.agent, "version": trajectory.runner, "model_name": trajectory.model},
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": usage.input_tokens,
            "total_completion_tokens": usage.output_tokens,
            "total_cached_tokens": usage.cache_read_tokens,
            "total_steps": len(steps),
        },
        "extra": {"stop_reason": trajectory.stop_reason, "protocol": trajectory.protocol},
    }


def _system_record(step: ToolStep | StateStep | ScoreStep | VerifierStep) -> dict[str, Any]:
    if isinstance(step, VerifierStep):
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
