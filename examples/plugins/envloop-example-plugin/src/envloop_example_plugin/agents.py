"""`greeter`: writes GREETING (REPEAT times, one per line) into GREETING_FILE in the task's
working directory, with one command in the trial's environment."""

import shlex

from envloop.agents import AgentContext, AgentInfo, AgentResult
from envloop.plugins import ComponentParams, param, read_params


class GreeterParams(ComponentParams):
    GREETING: str = param("the line to write", default="Hello, world!")
    GREETING_FILE: str = param(
        "the file to write, relative to the working directory",
        default="hello.txt",
        pattern=r"^[A-Za-z0-9._-]{1,64}$",
        expect="a plain file name",
    )
    REPEAT: int = param("how many times to write the line", default=1, ge=1, le=100)


class GreeterAgent:
    info = AgentInfo(name="greeter", description="writes a greeting into a file of the working directory")
    params_model = GreeterParams

    async def run(self, ctx: AgentContext) -> AgentResult:
        params, problems = read_params(GreeterParams, ctx.spec.params)
        if params is None:  # submission refuses such a profile; a hand-built trial may still have one
            return AgentResult(exit_code=None, error="; ".join(problems))
        target = f"{ctx.environment.visible.app}/{params.GREETING_FILE}"
        lines = "".join(f"{params.GREETING}\n" for _ in range(params.REPEAT))
        result = await ctx.environment.exec(
            ["bash", "-c", f"printf %s {shlex.quote(lines)} > {shlex.quote(target)}"],
            env=ctx.env,
            stdout_path=ctx.stdout_path,
            stderr_path=ctx.stderr_path,
        )
        return AgentResult(exit_code=result.exit_code)
