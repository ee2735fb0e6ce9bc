"""`codex`: the Codex CLI (`codex exec`), run non-interactively inside the trial's environment
against the profile's endpoint over the OpenAI Responses API (the only protocol it speaks).

Install: `@openai/codex` at AGENT_VERSION from the npm registry, once per worker, into the agent
cache; the CLI is its statically linked native binary, so a task image needs nothing of its own.

Run: `codex exec --json` reads the instruction on stdin, with approvals and Codex's own sandbox off
(the trial's environment is the boundary). Its configuration (`$CODEX_HOME/config.toml`, written
fresh for each trial) names one model provider, `envloop`, at MODEL_BASE_URL with `wire_api =
"responses"`, the key read from MODEL_API_KEY, the model MODEL_NAME and REASONING_EFFORT; the task's
MCP servers become `[mcp_servers.NAME]` tables. The JSON stream is kept as `codex.jsonl` and Codex's
own session record (its rollout file) under `codex-home/sessions/` of the agent's logs; the stream
becomes the trajectory
(codex_events.py).
"""

import json
from typing import Literal

from envloop.agents.base import AgentContext, AgentInfo
from envloop.agents.cli_agent import (
    CliLaunch,
    CliStart,
    OpenAICliParams,
    StreamingCliAgent,
    version_param,
    write_config,
)
from envloop.agents.codex_events import CodexEvents
from envloop.agents.recipes import NpmRecipe
from envloop.core.params import param
from envloop.tasks.task_toml import McpServer

DEFAULT_VERSION = "0.171.0"
RECIPE = NpmRecipe(
    label="codex",
    package="@openai/codex",
    program="node_modules/@openai/codex-{platform}/vendor/{triple}/bin/codex",
    path_dirs=("node_modules/@openai/codex-{platform}/vendor/{triple}/codex-path",),
)
RUN_SCRIPT = (
    'mkdir -p "$CODEX_HOME" && cp "$ENVLOOP_CODEX_CONFIG" "$CODEX_HOME/config.toml" && '
    'PATH="$ENVLOOP_AGENT_PATH:$PATH" exec "$0" exec --json --skip-git-repo-check '
    '--dangerously-bypass-approvals-and-sandbox - < "$ENVLOOP_INSTRUCTION_FILE"'
)


class CodexParams(OpenAICliParams):
    """The Responses endpoint, the CLI's version and its reasoning effort."""

    AGENT_VERSION: str = version_param("@openai/codex", DEFAULT_VERSION)
    REASONING_EFFORT: Literal["minimal", "low", "medium", "high", "xhigh"] | None = param(
        "model_reasoning_effort in Codex's configuration; the model's default when unset"
    )


def _toml(value: object) -> str:
    """A TOML value: strings and lists of strings are JSON-compatible TOML."""
    return json.dumps(value)


def codex_config(params: CodexParams, servers: list[McpServer]) -> str:
    """Codex's config.toml for one trial."""
    lines = [
        f"model = {_toml(params.MODEL_NAME)}",
        'model_provider = "envloop"',
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        "check_for_update_on_startup = false",
    ]
    if params.REASONING_EFFORT is not None:
        lines.append(f"model_reasoning_effort = {_toml(params.REASONING_EFFORT)}")
    lines += [
        "",
        "[model_providers.envloop]",
        'name = "envloop"',
        f"base_url = {_toml(params.MODEL_BASE_URL.rstrip('/'))}",
        'wire_api = "responses"',
    ]
    if params.MODEL_API_KEY:
        lines.append('env_key = "MODEL_API_KEY"')
    for server in servers:
        lines += ["", f"[mcp_servers.{_toml(server.name)}]"]
        if server.transport == "stdio":
            lines += [f"command = {_toml(server.command)}", f"args = {_toml(server.args)}"]
        else:
            lines.append(f"url = {_toml(server.url)}")
    return "\n".join(lines) + "\n"


class CodexAgent(StreamingCliAgent[CodexParams]):
    info = AgentInfo(
        name="codex",
        description="the Codex CLI (codex exec) over the OpenAI Responses API, from the worker's agent cache",
        records_steps=True,
        calls_model_inside="openai",
        speaks_mcp=True,
        steps_limited_by_gateway=True,
    )
    params_model = CodexParams
    recipe = RECIPE

    async def launch(self, ctx: AgentContext, started: CliStart[CodexParams]) -> CliLaunch:
        params, inside = started.params, started.provisioned.inside
        codex_home = f"{ctx.environment.visible.agent_logs}/codex-home"  # kept: its sessions record the run
        servers = ctx.task.config.environment.mcp_servers
        config = await write_config(ctx, "codex.toml", codex_config(params, servers))
        variables = {
            "CODEX_HOME": codex_home,
            "ENVLOOP_CODEX_CONFIG": config,
            "ENVLOOP_AGENT_PATH": RECIPE.path(inside),
            "MODEL_API_KEY": params.MODEL_API_KEY or "",
            "RUST_LOG": "warn",
        }
        summary = params.request_summary(
            {"reasoning_effort": params.REASONING_EFFORT}, protocol="openai-responses"
        )
        events = CodexEvents(ctx.recorder, summary, model_steps=not ctx.model_gateway)
        return CliLaunch(["bash", "-c", RUN_SCRIPT, *RECIPE.argv(inside)], variables, events)
