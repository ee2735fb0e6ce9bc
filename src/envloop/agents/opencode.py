"""`opencode`: the OpenCode CLI (`opencode run`), non-interactive inside the trial's environment,
against the profile's endpoint as an OpenAI-compatible provider (Chat Completions).

Install: `opencode-ai` at AGENT_VERSION from the npm registry, once per worker, into the agent cache;
the CLI is its native binary (its provider for OpenAI-compatible endpoints is built in, so nothing
is fetched at run time).

Run: `opencode run --format json` with the instruction as its message; its configuration
(`OPENCODE_CONFIG`, written fresh for each trial) defines one provider, `envloop`, at
MODEL_BASE_URL with the key from MODEL_API_KEY and the one model MODEL_NAME (also its small model,
so no request names a model the endpoint lacks), every permission allowed (the environment is the
boundary), sharing and auto-update off, TEMPERATURE and the step budget (`--max-steps`, else
MAX_STEPS, else 30) as its `build` agent's `steps`, and
the task's MCP servers under `mcp`. The JSON stream is kept as `opencode.jsonl` and becomes the
trajectory (opencode_events.py): each model call with its tokens, each tool call with its result.
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
from envloop.agents.opencode_events import OpenCodeEvents
from envloop.agents.recipes import NpmRecipe
from envloop.core.params import param
from envloop.tasks.task_toml import McpServer

DEFAULT_VERSION = "1.18.33"
RECIPE = NpmRecipe(
    label="opencode", package="opencode-ai", program="node_modules/opencode-{platform}/bin/opencode"
)
RUN_SCRIPT = 'exec "$0" run --format json -m "envloop/$MODEL_NAME" < "$ENVLOOP_INSTRUCTION_FILE"'


class OpenCodeParams(OpenAICliParams):
    """The endpoint, the CLI's version, its sampling temperature and step budget."""

    AGENT_VERSION: str = version_param("opencode-ai", DEFAULT_VERSION)
    TEMPERATURE: float | None = param("the build agent's temperature; the model's default when unset", ge=0)
    MAX_STEPS: int | None = param(
        "the build agent's `steps` when the job gives no --max-steps (default "
        f"{DEFAULT_MAX_STEPS}): after them OpenCode asks for a text-only answer (a soft limit)",
        ge=1,
    )


def opencode_config(params: OpenCodeParams, steps: int, servers: list[McpServer]) -> str:
    """OpenCode's configuration for one trial."""
    model = params.MODEL_NAME
    provider: dict[str, Any] = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "envloop",
        "options": {"baseURL": params.MODEL_BASE_URL.rstrip("/"), "apiKey": "{env:MODEL_API_KEY}"},
        "models": {model: {"name": model, "temperature": True, "tool_call": True}},
    }
    build: dict[str, Any] = {"steps": steps}
    if params.TEMPERATURE is not None:
        build["temperature"] = params.TEMPERATURE
    mcp: dict[str, Any] = {}
    for server in servers:
        if server.transport == "stdio":
            mcp[server.name] = {"type": "local", "command": [server.command, *server.args], "enabled": True}
        else:
            mcp[server.name] = {"type": "remote", "url": server.url, "enabled": True}
    config: dict[str, Any] = {
        "provider": {"envloop": provider},
        "model": f"envloop/{model}",
        "small_model": f"envloop/{model}",
        "permission": {"*": "allow"},
        "autoupdate": False,
        "share": "disabled",
    }
    config["agent"] = {"build": build}
    if mcp:
        config["mcp"] = mcp
    return json.dumps(config, indent=2)


class OpenCodeAgent(StreamingCliAgent[OpenCodeParams]):
    info = AgentInfo(
        name="opencode",
        description="the OpenCode CLI (opencode run) over Chat Completions, from the worker's agent cache",
        records_steps=True,
        calls_model_inside="openai",
        speaks_mcp=True,
    )
    params_model = OpenCodeParams
    recipe = RECIPE

    async def launch(self, ctx: AgentContext, started: CliStart[OpenCodeParams]) -> CliLaunch:
        params, inside = started.params, started.provisioned.inside
        servers = ctx.task.config.environment.mcp_servers
        steps = ctx.max_steps(params.MAX_STEPS)
        config = await write_config(ctx, "opencode.json", opencode_config(params, steps, servers))
        variables = {
            "OPENCODE_CONFIG": config,
            "MODEL_API_KEY": params.MODEL_API_KEY or "no-key",
            "MODEL_NAME": params.MODEL_NAME,
            "OPENCODE_DISABLE_AUTOUPDATE": "true",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "true",
        }
        summary = params.request_summary({"temperature": params.TEMPERATURE, "steps": steps})
        events = OpenCodeEvents(ctx.recorder, summary, model_steps=not ctx.model_gateway)
        return CliLaunch(["bash", "-c", RUN_SCRIPT, *RECIPE.argv(inside)], variables, events)
