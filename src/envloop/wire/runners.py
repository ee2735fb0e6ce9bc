"""What `el runner list|show` and `GET /v1/runners` show about a runner: its task kind, where it
came from, the JSON schema of the params it reads, and the agents it can run with theirs."""

from typing import Any, Literal

from pydantic import Field

from envloop.core.lazy import LazyModel

TaskKind = Literal["harbor", "chat"]
Source = Literal["built-in", "plugin", "reference"]


class Origin(LazyModel):
    """Where a component came from: built into envloop, an installed plugin's entry point, or a
    `module:Name` reference."""

    source: Source
    distribution: str | None = None
    version: str | None = None
    entry_point: str | None = None
    """`module:attr` the entry point (or reference) names; None for a built-in."""

    def label(self) -> str:
        if self.source == "built-in":
            return "built-in"
        if self.source == "plugin":
            return f"{self.distribution} {self.version} ({self.entry_point})"
        return f"reference {self.entry_point}"


class ComponentInfo(LazyModel):
    """A component a runner hosts (the shell runner's agents), with its params' JSON schema."""

    name: str
    description: str
    origin: Origin
    params_schema: dict[str, Any] = Field(description="JSON schema of the profile params it reads")


class RunnerInfo(LazyModel):
    ref: str
    task_kind: TaskKind
    description: str
    origin: Origin
    params_schema: dict[str, Any] = Field(description="JSON schema of the profile params the runner reads")
    agents: list[ComponentInfo] = Field(
        default_factory=list, description="the agents AGENT_NAME may name, each with its params' schema"
    )


__all__ = [
    "ComponentInfo",
    "Origin",
    "RunnerInfo",
    "TaskKind",
]
