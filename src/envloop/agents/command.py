"""`command`: any agent command line (the profile's `AGENT_COMMAND`), run with `bash -c`.

The command gets every profile param as an environment variable: an arbitrary agent may need any
of them, so none is reported as unread. Its MODEL_BASE_URL and MODEL_API_KEY are the model
gateway's (OpenAI's protocol unless MODEL_PROTOCOL=anthropic), never the real key; every other
param, secret or not, reaches the command as the profile gave it.
"""

from envloop.agents.base import AgentContext, AgentInfo, AgentResult
from envloop.core.params import AllParams, param


class CommandParams(AllParams):
    AGENT_COMMAND: str = param("the command line to run with bash -c", default=...)


class CommandAgent:
    info = AgentInfo(
        name="command",
        description="runs the profile's AGENT_COMMAND with bash -c; profile params become variables",
        calls_model_inside="openai",
    )
    params_model = CommandParams

    async def run(self, ctx: AgentContext) -> AgentResult:
        params = dict(ctx.spec.params)
        result = await ctx.environment.exec(
            ["bash", "-c", params["AGENT_COMMAND"]],
            env={**params, **ctx.env},
            stdout_path=ctx.stdout_path,
            stderr_path=ctx.stderr_path,
        )
        return AgentResult(exit_code=result.exit_code)
