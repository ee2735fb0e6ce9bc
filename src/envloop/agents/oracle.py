"""`oracle`: runs the task's reference solution, proving the task is solvable and the verifier fair."""

from envloop.agents.base import AgentContext, AgentInfo, AgentResult, NoParams


class OracleAgent:
    info = AgentInfo(name="oracle", description="runs the task's solution/solve.sh")
    params_model = NoParams

    async def run(self, ctx: AgentContext) -> AgentResult:
        if not (ctx.task.solution_dir / "solve.sh").is_file():
            return AgentResult(exit_code=None, error="task has no solution/solve.sh", attempted=False)
        environment = ctx.environment
        script = f"{environment.visible.solution}/solve.sh"
        result = await environment.exec(
            ["bash", script],
            env=ctx.env,
            stdout_path=ctx.stdout_path,
            stderr_path=ctx.stderr_path,
            mounts=frozenset({"solution"}),
        )
        return AgentResult(exit_code=result.exit_code)
