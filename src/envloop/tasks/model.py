"""Typed view of a loaded task: a Harbor task directory and its steps, a JSONL row, and the error
a task that cannot be loaded raises. What task.toml says is `TaskConfig` (task_toml.py)."""

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from envloop.tasks.task_toml import StepConfig, TaskConfig, TaskUser

COMPOSE_FILE = "docker-compose.yaml"
"""The one name Harbor reads as a task's compose file (in `environment/`); a `compose.yaml` or
`docker-compose.yml` beside it is build-context data like any other file."""


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
