"""An agent whose model calls are recorded for it, as the worker's gateway records a CLI agent's:
it solves the task with one command (so the verifier rewards it), and its trajectory holds
`CALLS` model steps of which `FAILED` carry an error. Profiles name it `tests.recorded_calls_agent:
RecordedCalls` (the worker needs ENVLOOP_PLUGIN_MODULES=tests.recorded_calls_agent)."""

from envloop.agents.base import AgentContext, AgentInfo, AgentResult
from envloop.core.params import ComponentParams, param, read_params
from envloop.core.trajectory import ModelRequestSummary, ModelStep


class RecordedCallsParams(ComponentParams):
    CALLS: int = param("model calls recorded", default=1, ge=1)
    FAILED: int = param("how many of them failed", default=0, ge=0)


class RecordedCalls:
    info = AgentInfo(
        name="recorded-calls", description="test agent with recorded model calls", records_steps=True
    )
    params_model = RecordedCallsParams

    async def run(self, ctx: AgentContext) -> AgentResult:
        params, problems = read_params(RecordedCallsParams, ctx.spec.params)
        assert params is not None, problems
        summary = ModelRequestSummary(protocol="openai", endpoint="gateway", model="scripted", messages=1)
        for number in range(params.CALLS):
            failed = number < params.FAILED
            ctx.recorder.add(
                ModelStep(request=summary, text="" if failed else "ok", error="HTTP 401" if failed else None)
            )
        result = await ctx.environment.exec(["touch", f"{ctx.environment.visible.app}/done"])
        return AgentResult(exit_code=result.exit_code)
