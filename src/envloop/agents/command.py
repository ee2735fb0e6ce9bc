"""`command`: any agent command line (the profile's `AGENT_COMMAND`), run with `bash -c`.

The command gets the profile's params as environment variables: an arbitrary agent may need any
of them, so none is reported as unread. Its MODEL_BASE_URL and MODEL_API_KEY are the model
gateway's (OpenAI's protocol unless MODEL_PROTOCOL=anthropic), never the real key. A param that
only the task's verifiers name (`${JUDGE_KEY}` in `[verifier] env`) is withheld, and the trial says
so; every other param, secret or not, reaches the command as the profile gave it.
"""

from envloop.agents.base import AgentContext, AgentInfo, AgentResult
from envloop.core.params import AllParams, param
from envloop.tasks.variables import verifier_only_variables


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
        withheld = sorted(verifier_only_variables(ctx.task) & ctx.spec.params.keys() - {"AGENT_COMMAND"})
        params = {name: value for name, value in ctx.spec.params.items() if name not in withheld}
        note = f"not given to the agent, the task's verifier's only: {', '.join(withheld)}"
        if withheld and note not in ctx.environment.warnings:  # once, whatever the steps
            ctx.environment.warnings.append(note)
        result = await ctx.environment.exec(
            ["bash", "-c", params["AGENT_COMMAND"]],
            env={**params, **ctx.env},
            stdout_path=ctx.stdout_path,
            stderr_path=ctx.stderr_path,
        )
        return AgentResult(exit_code=result.exit_code)
