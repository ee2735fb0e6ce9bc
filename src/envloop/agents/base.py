"""The Agent protocol: whatever attempts the task inside the environment during the agent phase.

An agent only talks to the environment through `exec`; the runner owns the timeout (it cancels the
agent, and `exec` kills the process tree on cancellation), the phase record and the status mapping.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, Field

from envloop.core.trial import TrialSpec
from envloop.environments.base import Environment
from envloop.tasks.model import HarborTask


class AgentInfo(BaseModel):
    """What a profile must (and may) carry for this agent."""

    name: str
    description: str
    required_params: tuple[str, ...] = ()
    optional_params: tuple[str, ...] = ()
    passes_all_params: bool = Field(
        default=False, description="every profile param reaches the agent, so none is unread"
    )


class AgentResult(BaseModel):
    exit_code: int | None = 0
    error: str | None = Field(default=None, description="why the agent could not do its job at all")


@dataclass
class AgentContext:
    """One agent phase: the environment, the task, and the variables every agent command gets."""

    environment: Environment
    task: HarborTask
    spec: TrialSpec
    env: dict[str, str] = field(default_factory=dict)
    stdout_path: Path | None = None
    stderr_path: Path | None = None


class Agent(Protocol):
    info: AgentInfo

    async def run(self, ctx: AgentContext) -> AgentResult: ...
