"""`mini-swe-agent`: mini-SWE-agent's `mini` command, non-interactive inside the trial's environment,
against the profile's endpoint over Chat Completions (through litellm's `openai/` provider).

Install: `mini-swe-agent` at AGENT_VERSION from PyPI, as wheels for the environment's own `python3`
(≥ 3.10), once per worker and Python, into the agent cache.

Run: `python3 -m minisweagent.run.mini` in yolo mode, exiting when the agent submits, with its
built-in `mini.yaml` and a configuration of the trial's own: the model `openai/MODEL_NAME` at
MODEL_BASE_URL (key in OPENAI_API_KEY), TEMPERATURE, the step budget as `step_limit`, no cost limit
(cost tracking cannot price an unknown model), litellm's bundled price table (nothing fetched). Its
trajectory file (`mini-swe-agent.traj.json`, kept with the agent's logs, rewritten after each step)
becomes the trajectory: each model response with its bash tool calls and usage, each command with its
output and exit code; a run cut short (its timeout, a cancelled trial) keeps the steps it finished.
"""

import contextlib
import json
from typing import Any

from envloop.agents.base import DEFAULT_MAX_STEPS, AgentContext, AgentInfo, AgentResult
from envloop.agents.cli_agent import (
    CliAgent,
    CliStart,
    OpenAICliParams,
    cli_result,
    record_changes,
    run_cli,
    version_param,
    write_config,
)
from envloop.agents.json_values import as_count, as_object, parse_object
from envloop.agents.recipes import PipRecipe, site_dir
from envloop.core.params import param
from envloop.core.trajectory import (
    ModelRequestSummary,
    ModelStep,
    StopReason,
    ToolCall,
    ToolStep,
    TrajectoryRecorder,
    Usage,
)

DEFAULT_VERSION = "2.4.6"
RECIPE = PipRecipe(
    label="mini-swe-agent", package="mini-swe-agent", module="minisweagent.run.mini", min_python=(3, 10)
)
TRAJECTORY = "mini-swe-agent.traj.json"
RUN_SCRIPT = (
    'exec "$@" -y --exit-immediately -c mini.yaml -c "$ENVLOOP_MINI_CONFIG" -o "$ENVLOOP_MINI_TRAJECTORY" '
    '-t "$(cat "$ENVLOOP_INSTRUCTION_FILE")"'
)
_STOPS: dict[str, StopReason] = {"Submitted": "done", "LimitsExceeded": "max_steps"}
_MODEL_FAILURES = {
    "APIConnectionError",
    "APIError",
    "AuthenticationError",
    "BadRequestError",
    "ContextWindowExceededError",
    "InternalServerError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "ServiceUnavailableError",
    "Timeout",
    "UnsupportedParamsError",
}
"""Exit statuses (litellm's exception names) that say the endpoint failed, not the agent."""


class MiniSweAgentParams(OpenAICliParams):
    """The endpoint, the package's version, the temperature and the step budget."""

    AGENT_VERSION: str = version_param("mini-swe-agent", DEFAULT_VERSION)
    TEMPERATURE: float | None = param("the sampling temperature; the model's default when unset", ge=0)
    MAX_STEPS: int | None = param(
        f"step_limit (model calls) when the job gives no --max-steps (default {DEFAULT_MAX_STEPS})", ge=1
    )


def mini_config(params: MiniSweAgentParams, step_limit: int) -> str:
    """The trial's configuration, merged over the built-in mini.yaml (JSON is YAML)."""
    kwargs: dict[str, Any] = {"api_base": params.MODEL_BASE_URL.rstrip("/"), "drop_params": True}
    if params.TEMPERATURE is not None:
        kwargs["temperature"] = params.TEMPERATURE
    config = {
        "agent": {"step_limit": step_limit, "cost_limit": 0, "mode": "yolo", "confirm_exit": False},
        "model": {
            "model_name": f"openai/{params.MODEL_NAME}",
            "cost_tracking": "ignore_errors",
            "model_kwargs": kwargs,
        },
    }
    return json.dumps(config, indent=2)


def _usage(response: dict[str, Any]) -> Usage:
    usage = as_object(response.get("usage"))
    return Usage(
        input_tokens=as_count(usage.get("prompt_tokens")),
        output_tokens=as_count(usage.get("completion_tokens")),
    )


def read_trajectory_file(
    data: dict[str, Any], recorder: TrajectoryRecorder, summary: ModelRequestSummary, model_steps: bool
) -> str:
    """Steps from a mini-SWE-agent trajectory; returns its exit status."""
    calls: dict[str, ToolCall] = {}
    for number, message in enumerate(map(as_object, data.get("messages") or [])):
        extra = as_object(message.get("extra"))
        role = message.get("role")
        response = as_object(extra.get("response"))
        if role == "assistant" or (
            role == "user" and extra.get("interrupt_type") == "FormatError" and response
        ):
            step = _model_step(message, response, summary.model_copy(update={"messages": number}))
            for call in step.tool_calls:
                calls[call.id] = call
            if model_steps:
                recorder.add(step)
        elif role == "tool":
            call = calls.get(str(message.get("tool_call_id"))) or ToolCall(
                id=str(message.get("tool_call_id")), name="bash"
            )
            returncode = extra.get("returncode")
            recorder.add(
                ToolStep(
                    call_id=call.id,
                    tool=call.name,
                    arguments=call.arguments,
                    command=str(call.arguments.get("command", "")),
                    exit_code=returncode if isinstance(returncode, int) and returncode >= 0 else None,
                    stdout=str(extra.get("raw_output", "")),
                    error=str(extra["exception_info"]) if extra.get("exception_info") else None,
                )
            )
    return str(as_object(data.get("info")).get("exit_status", ""))


def _model_step(message: dict[str, Any], response: dict[str, Any], request: ModelRequestSummary) -> ModelStep:
    choice = as_object((response.get("choices") or [{}])[0])
    answer = as_object(choice.get("message")) or message
    calls = []
    for raw in map(as_object, answer.get("tool_calls") or []):
        function = as_object(raw.get("function"))
        text = str(function.get("arguments", ""))
        arguments = parse_object(text)
        calls.append(
            ToolCall(id=str(raw.get("id", "")), name=str(function.get("name", "")), arguments=arguments)
        )
    finish = choice.get("finish_reason")
    return ModelStep(
        request=request,
        text=str(answer.get("content") or ""),
        tool_calls=calls,
        stop="tool_calls" if calls else ("length" if finish == "length" else "end"),
        finish_reason=finish if isinstance(finish, str) else None,
        served_by=response.get("model") if isinstance(response.get("model"), str) else None,
        response_id=response.get("id") if isinstance(response.get("id"), str) else None,
        usage=_usage(response),
    )


async def _read_record(ctx: AgentContext, trajectory: str, summary: ModelRequestSummary) -> str:
    """The trajectory file as steps (model steps unless the gateway records the calls); its exit
    status, empty when the file is missing, cut mid-write or shows no end."""
    raw = await ctx.environment.read_file(trajectory, 64 << 20)
    if raw is None:
        return ""
    return read_trajectory_file(parse_object(raw), ctx.recorder, summary, not ctx.model_gateway)


class MiniSweAgent(CliAgent[MiniSweAgentParams]):
    info = AgentInfo(
        name="mini-swe-agent",
        description="mini-SWE-agent (a bash tool over Chat Completions), from the worker's agent cache",
        records_steps=True,
        calls_model_inside="openai",
    )
    params_model = MiniSweAgentParams
    recipe = RECIPE

    async def drive(self, ctx: AgentContext, started: CliStart[MiniSweAgentParams]) -> AgentResult:
        params, inside = started.params, started.provisioned.inside
        environment = ctx.environment
        home = environment.visible.home
        step_limit = ctx.max_steps(params.MAX_STEPS)
        config = await write_config(ctx, "mini-swe-agent.yaml", mini_config(params, step_limit))
        trajectory = f"{environment.visible.agent_logs}/{TRAJECTORY}"
        variables = {
            "PYTHONPATH": site_dir(inside),
            "PYTHONDONTWRITEBYTECODE": "1",
            "OPENAI_API_KEY": params.MODEL_API_KEY or "no-key",
            "MSWEA_CONFIGURED": "true",
            "MSWEA_SILENT_STARTUP": "1",
            "MSWEA_GLOBAL_CONFIG_DIR": f"{home}/.config/mini-swe-agent",
            "MSWEA_COST_TRACKING": "ignore_errors",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "ENVLOOP_MINI_CONFIG": config,
            "ENVLOOP_MINI_TRAJECTORY": trajectory,
        }
        argv = ["bash", "-c", RUN_SCRIPT, "mini-swe-agent", *RECIPE.argv()]
        summary = params.request_summary(
            {"temperature": params.TEMPERATURE, "step_limit": step_limit}, tools=["bash"]
        )
        try:
            result = await run_cli(
                ctx, argv, variables, "mini-swe-agent.stdout.txt", "mini-swe-agent.stderr.txt"
            )
        except BaseException:
            # Cut short (its timeout, a cancelled trial): mini-SWE-agent rewrites its trajectory file
            # after every step, so the steps it finished are kept, and so are its changes.
            with contextlib.suppress(Exception):
                await _read_record(ctx, trajectory, summary)
                await record_changes(ctx, started.before, "mini-swe-agent")
            raise
        status = await _read_record(ctx, trajectory, summary)
        await record_changes(ctx, started.before, "mini-swe-agent")
        if status in _MODEL_FAILURES:
            return cli_result(result, "model_error", f"mini-SWE-agent ended with {status}", "mini-swe-agent")
        if status and status not in _STOPS:
            return AgentResult(exit_code=result.exit_code, error=f"mini-SWE-agent ended with {status}")
        return cli_result(result, _STOPS.get(status), None, "mini-swe-agent")
