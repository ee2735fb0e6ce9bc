"""`gemini-cli`: Google's Gemini CLI (`gemini`), non-interactive inside the trial's environment. It
speaks only the Gemini API; the model gateway carries that to the profile's OpenAI-protocol
endpoint, translating it (gateway/gemini.py), so the profile names a Chat Completions endpoint as
for every other CLI.

Install: `@google/gemini-cli` at AGENT_VERSION with a Node.js 22 runtime beside it, both from the
npm registry, once per worker, into the agent cache (the CLI needs Node.js ≥ 20).

Run: the instruction on stdin, `--yolo` (every tool allowed: the environment is the boundary),
`--skip-trust` (the working directory is the task's), `--output-format stream-json`, `-m
MODEL_NAME`. The endpoint is GOOGLE_GEMINI_BASE_URL (the gateway's root: MODEL_BASE_URL without
its `/v1`) with GEMINI_API_KEY (the trial's token, sent as `x-goog-api-key`); its settings file
(`~/.gemini/settings.json`, written fresh) selects API-key auth, turns telemetry, usage statistics
and auto-update off, sets `model.maxSessionTurns` from the step budget (the CLI's own limit: it
exits 53 when it runs out) and names the task's MCP servers. The stream is kept as
`gemini-cli.jsonl` and becomes the trajectory (gemini_events.py).
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
from envloop.agents.gemini_events import GeminiEvents
from envloop.agents.recipes import NpmRecipe
from envloop.core.params import param
from envloop.tasks.task_toml import McpServer

DEFAULT_VERSION = "0.61.0"
RECIPE = NpmRecipe(
    label="gemini-cli",
    package="@google/gemini-cli",
    program="node_modules/@google/gemini-cli/bundle/gemini.js",
    node=True,
)
RUN_SCRIPT = (
    'mkdir -p "$HOME/.gemini" && cp "$ENVLOOP_GEMINI_SETTINGS" "$HOME/.gemini/settings.json" && '
    'exec "$0" "$1" --yolo --skip-trust --output-format stream-json -m "$GEMINI_MODEL" '
    '< "$ENVLOOP_INSTRUCTION_FILE"'
)
TURN_LIMIT_EXIT = 53
"""How Gemini CLI exits when maxSessionTurns ran out."""
_MCP_URL_KEYS = {"sse": "url", "streamable-http": "httpUrl"}


class GeminiCliParams(OpenAICliParams):
    """The endpoint (as the gateway carries Gemini's API to it), the CLI's version, its turn limit."""

    AGENT_VERSION: str = version_param("@google/gemini-cli", DEFAULT_VERSION)
    MAX_STEPS: int | None = param(
        f"model.maxSessionTurns when the job gives no --max-steps (default {DEFAULT_MAX_STEPS})", ge=1
    )


def gemini_settings(max_turns: int, servers: list[McpServer]) -> str:
    settings: dict[str, Any] = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "telemetry": {"enabled": False},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "model": {"maxSessionTurns": max_turns},
    }
    if servers:
        settings["mcpServers"] = {
            server.name: {"command": server.command, "args": server.args}
            if server.transport == "stdio"
            else {_MCP_URL_KEYS[server.transport]: server.url}
            for server in servers
        }
    return json.dumps(settings, indent=2)


class GeminiCliAgent(StreamingCliAgent[GeminiCliParams]):
    info = AgentInfo(
        name="gemini-cli",
        description="Google's Gemini CLI (own Node.js), its Gemini API carried by the gateway to an "
        "OpenAI-protocol endpoint, from the worker's agent cache",
        records_steps=True,
        calls_model_inside="openai",
        speaks_mcp=True,
    )
    params_model = GeminiCliParams
    recipe = RECIPE
    turn_limit_exit = TURN_LIMIT_EXIT

    async def launch(self, ctx: AgentContext, started: CliStart[GeminiCliParams]) -> CliLaunch:
        params, inside = started.params, started.provisioned.inside
        max_turns = ctx.max_steps(params.MAX_STEPS)
        settings = gemini_settings(max_turns, ctx.task.config.environment.mcp_servers)
        variables = {
            "ENVLOOP_GEMINI_SETTINGS": await write_config(ctx, "gemini-settings.json", settings),
            "GOOGLE_GEMINI_BASE_URL": params.MODEL_BASE_URL.rstrip("/").removesuffix("/v1"),
            "GEMINI_API_KEY": params.MODEL_API_KEY or "no-key",
            "GEMINI_MODEL": params.MODEL_NAME,
        }
        summary = params.request_summary({"max_turns": max_turns}, protocol="gemini")
        events = GeminiEvents(ctx.recorder, summary, model_steps=not ctx.model_gateway)
        return CliLaunch(["bash", "-c", RUN_SCRIPT, *RECIPE.argv(inside)], variables, events)
