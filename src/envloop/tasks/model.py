"""Typed view of a task. Unknown task.toml fields are kept (extra="allow"), never rejected."""

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Section(BaseModel):
    # A limit of `inf` or `nan` would mean "no limit" wherever it is compared; it is refused here.
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


# Harbor's `user` fields: a user name or a numeric uid, as in a Dockerfile's USER.
TaskUser = str | int
NetworkMode = Literal["no-network", "public", "allowlist"]


class AgentSection(_Section):
    timeout_sec: float | None = Field(default=None, gt=0)
    user: TaskUser | None = Field(default=None, description="who the agent's commands run as")


class VerifierSection(_Section):
    timeout_sec: float | None = Field(default=None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    user: TaskUser | None = Field(default=None, description="who tests/test.sh runs as")


class EnvironmentSection(_Section):
    cpus: float | None = Field(default=None, gt=0)
    memory_mb: int | None = Field(default=None, gt=0)
    storage_mb: int | None = Field(default=None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] = Field(default_factory=list)
    allow_internet: bool = Field(default=False, description="deprecated form of network_mode = public")

    @property
    def wants_network(self) -> bool:
        """Whether the task asks for a network beyond loopback. Harbor opens it by default; envloop
        keeps it closed unless the task says so (`network_mode` public or allowlist, or the older
        `allow_internet`)."""
        if self.network_mode is not None:
            return self.network_mode != "no-network"
        return self.allow_internet


class TaskConfig(_Section):
    """task.toml. Absent sections take defaults; a default timeout is applied by the runner."""

    version: str | None = None
    metadata: dict[str, object] = Field(default_factory=dict)
    agent: AgentSection = Field(default_factory=AgentSection)
    verifier: VerifierSection = Field(default_factory=VerifierSection)
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)


class HarborTask(BaseModel):
    """A loaded Harbor-format task directory."""

    kind: Literal["harbor"] = "harbor"
    name: str
    root: Path
    config: TaskConfig
    instruction: str
    digest: str

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.root / "solution"

    @property
    def environment_dir(self) -> Path:
        return self.root / "environment"


class ChatRow(BaseModel):
    """One JSONL row for model-only evaluation."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    prompt: str = Field(min_length=1)
    answer: str
    metadata: dict[str, object] = Field(default_factory=dict)


class TaskFormatError(ValueError):
    """A task that cannot be loaded. The message names the file (and field) at fault."""

    def __init__(self, file: Path | str, message: str, field: str | None = None) -> None:
        self.file = str(file)
        self.field = field
        where = f"{self.file}: {field}" if field else self.file
        super().__init__(f"{where}: {message}")
