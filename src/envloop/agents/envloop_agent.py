"""`envloop`: the built-in tool-calling agent. A model (Chat Completions or Messages, from the
profile's MODEL_* params) works on the task through two tools: `bash`, which runs a command in the
trial's environment, and `finish`, which ends the attempt.

One step is one model call. The loop ends when the model finishes (calls `finish` or answers without
asking for a tool: `done`), when the step budget is spent (`max_steps`: the job's `--max-steps`,
else the profile's MAX_STEPS), when an answer is cut by the output token limit without a tool call
(`length`), or when the endpoint fails for good (`model_error`, which fails the trial). The agent
timeout is the runner's: it cancels the loop, kills the running command and records `timeout`.

Each command runs in a fresh `bash -c` in the task's working directory, with the instruction
variables but none of the profile's params (a key for the model never enters the sandbox), and
with its own timeout (TOOL_TIMEOUT_SEC, default 300). The model sees at most TOOL_OUTPUT_LIMIT
characters of each result (default 10000: the head and the tail, with the middle left out); the
trajectory keeps the whole streams, and the agent's logs keep every command's output as files.
Secret values are masked in what goes back to the model as well as in everything kept.

TOOL_CHOICE asks the endpoint for `auto` (the model decides), `required` (some tool on every step)
or `bash` (that tool on every step, so the loop runs until its step budget: for small models that
call tools only when made to, such as the bundled local model). Unset, the server's default holds.
"""

import time
from pathlib import Path
from typing import Literal

from envloop.agents.base import (
    DEFAULT_MAX_STEPS,
    AgentContext,
    AgentInfo,
    AgentResult,
    read_outputs,
)
from envloop.core.clock import utc_now
from envloop.core.masking import mask_text
from envloop.core.params import param, read_params
from envloop.core.status import ErrorType
from envloop.core.trajectory import (
    SystemStep,
    ToolCall,
    ToolStep,
    UserStep,
)
from envloop.environments.base import ExecResult
from envloop.models import (
    Message,
    ModelClient,
    ModelError,
    ModelParams,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ToolSpec,
    model_client,
)
from envloop.trajectories import Snapshot, changes_between
from envloop.trajectories.model_steps import model_step, request_summary

DEFAULT_TOOL_TIMEOUT_SEC = 300.0
DEFAULT_TOOL_OUTPUT_LIMIT = 10_000

SYSTEM_PROMPT = """You are an autonomous agent in a Linux sandbox. Complete the user's task by running \
shell commands with the `bash` tool; commands start in {workdir}. Each call runs in a new shell: files \
persist between calls, the current directory and variables do not. Keep commands non-interactive. \
When the task is complete, call `finish`."""

BASH = ToolSpec(
    name="bash",
    description="Run a shell command (bash -c) in the task's working directory; returns its exit code, "
    "stdout and stderr.",
    parameters={
        "type": "object",
        "properties": {"command": {"type": "string", "description": "the command line to run"}},
        "required": ["command"],
    },
)
FINISH = ToolSpec(
    name="finish",
    description="End the attempt: call it once the task is complete.",
    parameters={
        "type": "object",
        "properties": {"summary": {"type": "string", "description": "what was done, in a sentence"}},
    },
)


class EnvloopParams(ModelParams):
    """The endpoint's params, the step budget and the tool settings."""

    MAX_STEPS: int | None = param(
        f"the step budget when the job gives no --max-steps (default {DEFAULT_MAX_STEPS})", ge=1
    )
    TOOL_TIMEOUT_SEC: float = param(
        "one command's timeout, in seconds", default=DEFAULT_TOOL_TIMEOUT_SEC, gt=0
    )
    TOOL_OUTPUT_LIMIT: int = param(
        "characters of each command's result the model sees (head and tail)",
        default=DEFAULT_TOOL_OUTPUT_LIMIT,
        gt=0,
    )
    TOOL_CHOICE: Literal["auto", "required", "bash"] | None = param(
        "auto (the model decides), required (some tool every step) or bash (that tool every step)"
    )


def clip_for_model(text: str, limit: int) -> str:
    """Head and tail of a long text, the middle replaced by a note saying how much was left out."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    return f"{text[:head]}\n[… {len(text) - limit} characters left out …]\n{text[-tail:]}"


class EnvloopAgent:
    info = AgentInfo(
        name="envloop",
        description="built-in tool-calling agent: a model runs bash commands in the environment",
        records_steps=True,
    )
    params_model = EnvloopParams

    async def run(self, ctx: AgentContext) -> AgentResult:
        params, problems = read_params(EnvloopParams, ctx.spec.params)
        if params is None:
            return AgentResult(exit_code=None, error="; ".join(problems), error_type=ErrorType.MODEL_ERROR)
        return await _Loop(ctx, params).run()


class _Loop:
    """One attempt's conversation: model call, tool calls, results back, until a stop reason."""

    def __init__(self, ctx: AgentContext, params: EnvloopParams) -> None:
        self.ctx = ctx
        self.settings: ModelSettings = params.settings()
        self.max_steps = ctx.max_steps(params.MAX_STEPS)
        self.tool_timeout = params.TOOL_TIMEOUT_SEC
        self.output_limit = params.TOOL_OUTPUT_LIMIT
        self.tool_choice: str | None = params.TOOL_CHOICE
        self.system = self.settings.system_prompt or SYSTEM_PROMPT.format(workdir=ctx.environment.visible.app)
        self.messages: list[Message] = [Message(role="user", content=ctx.task.instruction)]
        self.secrets = ctx.spec.secret_values
        self.commands = 0
        self.unnamed_calls = 0
        self.state: Snapshot = {}

    async def run(self) -> AgentResult:
        recorder = self.ctx.recorder
        recorder.add(SystemStep(text=self.system))
        recorder.add(UserStep(text=self.ctx.task.instruction))
        client = model_client(self.settings)
        self.state = await self.ctx.environment.snapshot()
        for _ in range(self.max_steps):
            response = await self._ask(client)
            if isinstance(response, ModelError):
                return AgentResult(
                    exit_code=None,
                    error=mask_text(response.message, self.secrets),
                    error_type=ErrorType.MODEL_ERROR,
                    stop_reason="model_error",
                )
            if not response.tool_calls:
                return AgentResult(stop_reason="length" if response.stop == "length" else "done")
            if await self._use_tools(response.tool_calls):
                return AgentResult(stop_reason="done")
        return AgentResult(stop_reason="max_steps")

    async def _ask(self, client: ModelClient) -> ModelResponse | ModelError:
        request = ModelRequest(
            messages=list(self.messages),
            system=self.system,
            tools=[BASH, FINISH],
            tool_choice=self.tool_choice,
        )
        summary = request_summary(self.settings, request)
        started = utc_now()
        try:
            response = await client.complete(request)
        except ModelError as exc:
            self.ctx.recorder.add(model_step(started, summary, None, exc.message, exc.attempts))
            return exc
        for call in response.tool_calls:
            if not call.id:  # the result must name its call; some servers leave the id out
                self.unnamed_calls += 1
                call.id = f"call_{self.unnamed_calls}"
        self.ctx.recorder.add(model_step(started, summary, response))
        self.messages.append(response.message)
        return response

    async def _use_tools(self, calls: list[ToolCall]) -> bool:
        """Run the calls in order; True when one of them was `finish` (later ones are not run)."""
        for call in calls:
            if call.name == FINISH.name and call.arguments_error is None:
                summary = call.arguments.get("summary")
                self.ctx.recorder.add(
                    ToolStep(
                        call_id=call.id,
                        tool=call.name,
                        arguments=call.arguments,
                        stdout=summary if isinstance(summary, str) else "",
                    )
                )
                return True
            content, is_error = await self._tool(call)
            reply = mask_text(clip_for_model(content, self.output_limit), self.secrets)
            self.messages.append(Message(role="tool", tool_call_id=call.id, content=reply, is_error=is_error))
        return False

    async def _tool(self, call: ToolCall) -> tuple[str, bool]:
        """Execute one call and record its step; (what the model is told, whether it failed)."""
        problem = None
        command = call.arguments.get("command")
        if call.arguments_error is not None:
            problem = f"the arguments of {call.name} are not usable: {call.arguments_error}"
        elif call.name != BASH.name:
            problem = f"unknown tool {call.name!r}: use bash or finish"
        elif not isinstance(command, str) or not command.strip():
            problem = "bash needs a non-empty `command` string"
        if problem is not None or not isinstance(command, str):
            self.ctx.recorder.add(
                ToolStep(call_id=call.id, tool=call.name, arguments=call.arguments, error=problem)
            )
            return f"error: {problem}", True
        return await self._bash(call, command)

    async def _bash(self, call: ToolCall, command: str) -> tuple[str, bool]:
        environment = self.ctx.environment
        self.commands += 1
        out_path = self.ctx.log_path(f"commands/{self.commands:04d}.stdout")
        err_path = self.ctx.log_path(f"commands/{self.commands:04d}.stderr")
        step = ToolStep(call_id=call.id, tool=call.name, arguments=call.arguments, command=command)
        clock = time.perf_counter()
        try:
            result = await environment.exec(
                ["bash", "-c", command],
                env=self.ctx.env,
                timeout=self.tool_timeout,
                stdout_path=out_path,
                stderr_path=err_path,
            )
        except BaseException:
            # The agent timeout (or a cancelled job) ended the command: keep what it did so far.
            step.duration_ms = (time.perf_counter() - clock) * 1000
            step.error = "interrupted: the agent phase ended while the command ran"
            try:
                after = await environment.snapshot(self.state)
            except Exception:  # the cancellation goes on whatever the snapshot met
                after = self.state
            self._finish_step(step, out_path, err_path, after)
            raise
        step.duration_ms = (time.perf_counter() - clock) * 1000
        step.exit_code, step.timed_out = result.exit_code, result.timed_out
        after = await environment.snapshot(self.state)
        self._finish_step(step, out_path, err_path, after, result)
        text = _result_text(result.exit_code, result.timed_out, self.tool_timeout, step.stdout, step.stderr)
        return text, result.exit_code != 0

    def _finish_step(
        self,
        step: ToolStep,
        out_path: Path,
        err_path: Path,
        after: Snapshot,
        result: ExecResult | None = None,
    ) -> None:
        """Complete a command's step with its whole output and its changes, and record it."""
        step.stdout, step.stderr, step.output_truncated = read_outputs(out_path, err_path, result)
        step.changes, self.state = changes_between(self.state, after), after
        self.ctx.recorder.add(step)


def _result_text(exit_code: int | None, timed_out: bool, timeout: float, stdout: str, stderr: str) -> str:
    head = f"timed out after {timeout:g} s (killed)" if timed_out else f"exit code {exit_code}"
    parts = [head]
    if stdout:
        parts.append("stdout:\n" + stdout)
    if stderr:
        parts.append("stderr:\n" + stderr)
    return "\n".join(parts)


__all__ = ["EnvloopAgent", "clip_for_model"]
