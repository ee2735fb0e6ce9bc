"""`nop`: does nothing, so the verifier sees the task's initial state (a baseline that should score 0)."""

from envloop.agents.base import AgentContext, AgentInfo, AgentResult, NoParams


class NopAgent:
    info = AgentInfo(name="nop", description="does nothing; measures what the untouched environment scores")
    params_model = NoParams

    async def run(self, ctx: AgentContext) -> AgentResult:
        return AgentResult(exit_code=0)
