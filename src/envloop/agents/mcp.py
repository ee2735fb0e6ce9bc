"""The task's MCP servers, as an agent that speaks MCP is told about them.

Harbor tasks declare `[[environment.mcp_servers]]`: a `stdio` server is a command run inside the
agent's environment, an `sse` or `streamable-http` server a URL the agent's environment reaches (a
compose sidecar by its service name). An agent that speaks MCP (`AgentInfo.speaks_mcp`) gets them in
the configuration its CLI reads; any other agent runs without them, and the trial says so.
"""

import json

from envloop.tasks.model import HarborTask
from envloop.tasks.task_toml import McpServer

_CLAUDE_TYPES = {"stdio": "stdio", "sse": "sse", "streamable-http": "http"}


def claude_mcp_config(servers: list[McpServer]) -> str:
    """Claude Code's `--mcp-config` document for the servers."""
    config: dict[str, dict[str, object]] = {}
    for server in servers:
        entry: dict[str, object] = {"type": _CLAUDE_TYPES[server.transport]}
        if server.transport == "stdio":
            entry |= {"command": server.command, "args": server.args}
        else:
            entry["url"] = server.url
        config[server.name] = entry
    return json.dumps({"mcpServers": config}, indent=2)


def unspoken(task: HarborTask, agent: str) -> str | None:
    """The trial's warning when its task offers MCP servers to an agent that cannot use them."""
    servers = task.config.environment.mcp_servers
    if not servers:
        return None
    names = ", ".join(server.name for server in servers)
    return f"[[environment.mcp_servers]] ({names}): agent {agent!r} does not speak MCP and runs without them"
