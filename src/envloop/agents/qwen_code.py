"""`qwen-code`: the Qwen Code CLI (`qwen`), non-interactive inside the trial's environment, against
the profile's endpoint over Chat Completions (its `openai` auth type).

Install: `@qwen-code/qwen-code` at AGENT_VERSION with a Node.js 22 runtime beside it, both from the
npm registry, once per worker, into the agent cache: the CLI needs Node.js ≥ 22, which a task image
need not have.

Run: the instruction on stdin, `--yolo` (every tool allowed: the environment is the boundary),
`--output-format stream-json`, `--max-session-turns` from the step budget; the endpoint comes from
OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL; its settings file (`~/.qwen/settings.json`, written
fresh) turns telemetry, usage statistics and auto-update off, runs the shell tool's commands as
plain child processes (below) and sets TEMPERATURE; the task's MCP servers are passed with
`--mcp-config`. The stream is kept as `qwen-code.jsonl` and becomes the trajectory (qwen_events.py).
"""

import json
from typing import Any

from envloop.agents.base import DEFAULT_MAX_STEPS, AgentContext, AgentInfo
from envloop.agents.cli_agent import (
    CliLaunch,
    CliStart,
    OpenAICliParams,
    StreamingCliAgent,
    version_param,
    write_config,
)
from envloop.agents.qwen_events import QwenEvents
from envloop.agents.recipes import NpmRecipe
from envloop.core.params import param
from envloop.tasks.task_toml import McpServer

DEFAULT_VERSION = "0.24.4"
RECIPE = NpmRecipe(
    label="qwen-code",
    package="@qwen-code/qwen-code",
    program="node_modules/@qwen-code/qwen-code/cli.js",
    node=True,
)
RUN_SCRIPT = (
    'mkdir -p "$HOME/.qwen" && cp "$ENVLOOP_QWEN_SETTINGS" "$HOME/.qwen/settings.json" && '
    'exec "$0" "$1" --auth-type openai -m "$OPENAI_MODEL" --yolo --output-format stream-json '
    '--max-session-turns "$2" ${ENVLOOP_MCP_CONFIG:+--mcp-config "$ENVLOOP_MCP_CONFIG"} '
    '< "$ENVLOOP_INSTRUCTION_FILE"'
)
TURN_LIMIT_EXIT = 53
"""How Qwen Code exits when --max-session-turns ran out (it writes no `result` event then)."""
_MCP_URL_KEYS = {"sse": "url", "streamable-http": "httpUrl"}


class QwenCodeParams(OpenAICliParams):
    """The endpoint, the CLI's version, its temperature and turn limit."""

    AGENT_VERSION: str = version_param("@qwen-code/qwen-code", DEFAULT_VERSION)
    TEMPERATURE: float | None = param("the sampling temperature; the model's default when unset", ge=0)
    MAX_STEPS: int | None = param(
        f"--max-session-turns when the job gives no --max-steps (default {DEFAULT_MAX_STEPS})", ge=1
    )


def qwen_settings(params: QwenCodeParams) -> str:
    settings: dict[str, Any] = {
        "telemetry": {"enabled": False},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        # As Qwen Code runs them for a one-shot prompt. An instruction on stdin otherwise counts as an
        # input-driven session, whose commands get a pseudo-terminal; when such a command exits, the
        # CLI keeps what its terminal emulator had drawn, and output not yet drawn is lost to the model.
        "tools": {"shell": {"enableInteractiveShell": False}},
    }
    if params.TEMPERATURE is not None:
        settings["model"] = {"generationConfig": {"samplingParams": {"temperature": params.TEMPERATURE}}}
    return json.dumps(settings, indent=2)


def qwen_mcp_config(servers: list[McpServer]) -> str:
    config: dict[str, dict[str, object]] = {}
    for server in servers:
        if server.transport == "stdio":
            config[server.name] = {"command": server.command, "args": server.args}
        else:
            config[server.name] = {_MCP_URL_KEYS[server.transport]: server.url}
    return json.dumps({"mcpServers": config}, indent=2)


class QwenCodeAgent(StreamingCliAgent[QwenCodeParams]):
    info = AgentInfo(
        name="qwen-code",
        description="the Qwen Code CLI over Chat Completions (own Node.js), from the worker's agent cache",
        records_steps=True,
        calls_model_inside="openai",
        speaks_mcp=True,
    )
    params_model = QwenCodeParams
    recipe = RECIPE
    turn_limit_exit = TURN_LIMIT_EXIT

    async def launch(self, ctx: AgentContext, started: CliStart[QwenCodeParams]) -> CliLaunch:
        params, inside = started.params, started.provisioned.inside
        variables = {
            "ENVLOOP_QWEN_SETTINGS": await write_config(ctx, "qwen-settings.json", qwen_settings(params)),
            "OPENAI_BASE_URL": params.MODEL_BASE_URL.rstrip("/"),
            "OPENAI_API_KEY": params.MODEL_API_KEY or "no-key",
            "OPENAI_MODEL": params.MODEL_NAME,
            "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
        }
        servers = ctx.task.config.environment.mcp_servers
        if servers:
            variables["ENVLOOP_MCP_CONFIG"] = await write_config(
                ctx, "qwen-mcp.json", qwen_mcp_config(servers)
            )
        max_turns = ctx.max_steps(params.MAX_STEPS)
        summary = params.request_summary({"temperature": params.TEMPERATURE, "max_turns": max_turns})
        events = QwenEvents(ctx.recorder, summary, model_steps=not ctx.model_gateway)
        argv = ["bash", "-c", RUN_SCRIPT, *RECIPE.argv(inside), str(max_turns)]
        return CliLaunch(argv, variables, events)
