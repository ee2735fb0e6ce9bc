"""Agents for the shell runner: `oracle`, `nop`, `command`, behind one small protocol."""

from envloop.agents.base import Agent, AgentContext, AgentInfo, AgentResult
from envloop.agents.command import CommandAgent
from envloop.agents.nop import NopAgent
from envloop.agents.oracle import OracleAgent

AGENTS: dict[str, Agent] = {agent.info.name: agent for agent in (CommandAgent(), NopAgent(), OracleAgent())}


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
    "CommandAgent",
    "NopAgent",
    "OracleAgent",
    "agent_names",
    "get_agent",
]
