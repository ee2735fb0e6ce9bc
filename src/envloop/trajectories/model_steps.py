"""How a model call enters a trajectory; shared by the chat runner and the tool-calling agent."""

from datetime import UTC, datetime

from envloop.core.trajectory import ModelRequestSummary, ModelStep
from envloop.models import ModelRequest, ModelResponse, ModelSettings


def request_summary(settings: ModelSettings, request: ModelRequest) -> ModelRequestSummary:
    """What a trajectory records of a request: endpoint, model, sizes and settings, never the key."""
    params = settings.summary()
    for name in ("protocol", "base_url", "model", "system_prompt"):
        params.pop(name, None)
    if request.tool_choice:
        params["tool_choice"] = request.tool_choice
    return ModelRequestSummary(
        protocol=settings.protocol,
        endpoint=settings.base_url,
        model=settings.model,
        messages=len(request.messages),
        tools=[t.name for t in request.tools],
        params=params,
    )


def model_step(
    started: datetime,
    summary: ModelRequestSummary,
    response: ModelResponse | None,
    error: str | None = None,
    attempts: int = 1,
) -> ModelStep:
    """The step for one call: its answer, or (response None) why there is none and how often it was tried."""
    duration = (datetime.now(UTC) - started).total_seconds() * 1000
    if response is None:
        return ModelStep(at=started, duration_ms=duration, request=summary, attempts=attempts, error=error)
    return ModelStep(
        at=started,
        duration_ms=duration,
        request=summary,
        text=response.text,
        reasoning=response.reasoning,
        tool_calls=response.tool_calls,
        stop=response.stop,
        finish_reason=response.finish_reason,
        served_by=response.model,
        response_id=response.response_id,
        usage=response.usage,
        attempts=response.attempts,
    )
