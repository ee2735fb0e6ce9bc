"""Agents for the shell runner: `oracle`, `nop`, `command`, `envloop`, `claude-code`, behind one
small protocol."""

from envloop.agents.base import Agent, AgentContext, AgentInfo, AgentResult
from envloop.agents.claude_code import ClaudeCodeAgent
from envloop.agents.command import CommandAgent
from envloop.agents.envloop_agent import EnvloopAgent
from envloop.agents.nop import NopAgent
from envloop.agents.oracle import OracleAgent

AGENTS: dict[str, Agent] = {
    agent.info.name: agent
    for agent in (ClaudeCodeAgent(), CommandAgent(), EnvloopAgent(), NopAgent(), OracleAgent())
}


def get_agent(name: str) -> Agent | None:
    return AGENTS.get(name)


def agent_names() -> list[str]:
    return sorted(AGENTS)


__all__ = [
    "AGENTS",
    "Agent",
    "AgentContext",
    "AgentInfo",
    "AgentResult",
    "ClaudeCodeAgent",
    "CommandAgent",
    "EnvloopAgent",
    "NopAgent",
    "OracleAgent",
    "agent_names",
    "get_agent",
]
