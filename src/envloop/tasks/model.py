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


class HealthcheckSection(_Section):
    """Harbor's `[environment.healthcheck]` (and `[steps.healthcheck]`), Docker's HEALTHCHECK in
    seconds: the command is probed until it passes; failures during the start period do not count,
    `retries` consecutive failures after it mean the environment never became healthy."""

    command: str = Field(min_length=1)
    interval_sec: float = Field(default=5.0, gt=0)
    timeout_sec: float = Field(default=30.0, gt=0)
    start_period_sec: float = Field(default=0.0, ge=0)
    start_interval_sec: float = Field(default=5.0, gt=0)
    retries: int = Field(default=3, ge=1)


class EnvironmentSection(_Section):
    cpus: float | None = Field(default=None, gt=0)
    memory_mb: int | None = Field(default=None, gt=0)
    storage_mb: int | None = Field(default=None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] = Field(default_factory=list)
    allow_internet: bool = Field(default=False, description="deprecated form of network_mode = public")
    healthcheck: HealthcheckSection | None = Field(default=None, description="probed before the agent starts")

    @property
    def wants_network(self) -> bool:
        """Whether the task asks for a network beyond loopback. Harbor opens it by default; envloop
        keeps it closed unless the task says so (`network_mode` public or allowlist, or the older
        `allow_internet`)."""
        if self.network_mode is not None:
            return self.network_mode != "no-network"
        return self.allow_internet


STEP_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


class StepConfig(_Section):
    """One `[[steps]]` entry: its own instruction, tests and solution live in `steps/<name>/`; its
    agent and verifier settings fall back to the task's."""

    name: str = Field(pattern=STEP_NAME_PATTERN)
    min_reward: float | dict[str, float] | None = None
    agent: AgentSection = Field(default_factory=AgentSection)
    verifier: VerifierSection = Field(default_factory=VerifierSection)
    healthcheck: HealthcheckSection | None = Field(default=None, description="probed before the step's agent")


class TaskConfig(_Section):
    """task.toml. Absent sections take defaults; a default timeout is applied by the runner."""

    version: str | None = None
    metadata: dict[str, object] = Field(default_factory=dict)
    agent: AgentSection = Field(default_factory=AgentSection)
    verifier: VerifierSection = Field(default_factory=VerifierSection)
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)
    steps: list[StepConfig] = Field(default_factory=list)
    multi_step_reward_strategy: Literal["mean", "final"] | None = None


class TaskStep(BaseModel):
    """A loaded step of a multi-step task."""

    config: StepConfig
    instruction: str
    root: Path

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def tests_dir(self) -> Path:
        """Laid over the task's own tests/ for this step's verifier (same-named files win)."""
        return self.root / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.root / "solution"


class HarborTask(BaseModel):
    """A loaded Harbor-format task directory. A multi-step task has `steps` (in order); its
    top-level instruction, if any, is never given to the agent."""

    kind: Literal["harbor"] = "harbor"
    name: str
    root: Path
    config: TaskConfig
    instruction: str
    digest: str
    steps: list[TaskStep] = Field(default_factory=list)
    active_step: str | None = Field(
        default=None,
        exclude=True,
        description="the step a multi-step trial is on: its tests, solution and agent user apply",
    )

    @property
    def step(self) -> TaskStep | None:
        return next((s for s in self.steps if s.name == self.active_step), None)

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"

    @property
    def tests_sources(self) -> list[Path]:
        """What a verifier sees at /tests, in order: the task's tests, then the active step's laid
        over them (same-named files win), as Harbor does."""
        step = self.step
        found = [self.tests_dir, *([step.tests_dir] if step is not None else [])]
        return [d for d in found if d.is_dir()]

    @property
    def solution_dir(self) -> Path:
        step = self.step
        return step.solution_dir if step is not None else self.root / "solution"

    @property
    def agent_user(self) -> TaskUser | None:
        """Who the agent runs as: the active step's `[steps.agent] user`, else the task's."""
        step = self.step
        if step is not None and step.config.agent.user is not None:
            return step.config.agent.user
        return self.config.agent.user

    @property
    def environment_dir(self) -> Path:
        return self.root / "environment"


MAX_INSTRUCTION_BYTES = 1024 * 1024
"""The longest instruction (a Harbor task's or step's `instruction.md`, a JSONL row's prompt) a
dataset may hold: every attempt records it in its trajectory, so a larger one would cost every
trial, and every reader of it, that much again."""


def instruction_problem(size: int) -> str | None:
    """Why an instruction of `size` bytes is refused, or None."""
    if size <= MAX_INSTRUCTION_BYTES:
        return None
    return f"{size} bytes is longer than the {MAX_INSTRUCTION_BYTES} bytes an instruction may have"


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
