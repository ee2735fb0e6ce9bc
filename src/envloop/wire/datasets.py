"""Datasets on the wire: a revision and its members."""

from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

from envloop.core.lazy import LazyModel
from envloop.wire.request import REQUEST

EnvironmentName = Literal["local", "docker"]
ENVIRONMENTS: tuple[EnvironmentName, ...] = ("local", "docker")


class TaskFeature(LazyModel):
    """One thing a task asks for that some (or every) environment of envloop does not give."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="a short stable key: gpus, compose, separate-verifier, …")
    label: str = Field(description="what the feature is, the same for every task that has it")
    detail: str = Field(description="what the task asks for, naming the file or field")
    environments: list[EnvironmentName] = Field(description="the environments that honour it")
    required: bool = Field(
        description="the task cannot be measured without it (a job asking for an environment that "
        "cannot give it is refused); "
        "otherwise the task runs without it and says so"
    )
    amount: float | None = Field(default=None, description="how many, for a counted resource (gpus)")

    def honoured_by(self, environment: EnvironmentName) -> bool:
        return environment in self.environments

    def describe(self) -> str:
        if not self.environments:
            where = "no environment of envloop honours it"
            refused = "a job with this task is refused"
        else:
            where = f"only the {' and '.join(self.environments)} environment honours it"
            refused = (
                "a job that asks for another --environment is refused; one that leaves the environment "
                "to its workers runs with a warning"
            )
        if not self.required:
            return f"{self.detail}: {where}; the task runs without it"
        return f"{self.detail}: {where}; {refused}"


class TaskOrigin(LazyModel):
    """Where a pulled task came from: a registry's dataset, and the repository, commit and path
    that hold the task's files."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    registry: str = Field(max_length=2000, description="the registry's URL, or its file's name")
    dataset: str = Field(max_length=200, description="the dataset's name in the registry")
    version: str = Field(max_length=200, description="the dataset's version in the registry")
    git_url: str = Field(max_length=2000, description="the repository the task was read from")
    commit: str = Field(pattern=r"^[0-9a-f]{40}([0-9a-f]{24})?$", description="the full commit id")
    path: str = Field(max_length=2000, description="the task's folder inside the repository")

    def describe(self) -> str:
        return f"{self.git_url}@{self.commit[:12]}:{self.path}"


class MemberView(LazyModel):
    position: int
    name: str
    digest: str
    origin: TaskOrigin | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="where the task came from, for a dataset pulled from a registry",
    )
    features: list[TaskFeature] | None = Field(
        default=None,
        description="task features some environment does not honour, found at push "
        "(null: pushed before they were recorded)",
    )


class DatasetView(LazyModel):
    name: str
    version: int
    ref: str
    runner: str
    kind: str
    scorer: str | None
    digest: str
    created_at: datetime
    member_count: int
    members: list[MemberView] | None = None
    warnings: list[str] = Field(
        default_factory=list,
        description="one line per task feature some environment does not honour (task: feature: where)",
    )
    created: bool | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="only on push: false when identical content already had this revision",
    )


@dataclass(config=REQUEST, frozen=True)
class PushDataset:
    path: Annotated[Path, Field(description="task folder(s) as .tar.gz/.tgz/.tar/.zip, or a .jsonl file")]
    name: Annotated[str, Field(min_length=1, description="dataset name; the revision becomes NAME@N")]
    runner: Annotated[str | None, Field(description="runner to pin (default by format)")] = None
    scorer: Annotated[str | None, Field(description="JSONL scorer: exact, includes, regex, numeric")] = None
    origins: Annotated[
        str | None,
        Field(
            max_length=1 << 20,
            description="JSON object: each task's name to where it came from (registry, dataset, version, "
            "git_url, commit, path), as `el dataset pull` records it",
        ),
    ] = None


__all__ = [
    "ENVIRONMENTS",
    "DatasetView",
    "EnvironmentName",
    "MemberView",
    "PushDataset",
    "TaskFeature",
]
