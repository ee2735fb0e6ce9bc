"""What `el runner list` shows about a runner: its task kind and the params it reads."""

from typing import Literal

from envloop.core.lazy import LazyModel

TaskKind = Literal["harbor", "chat"]


class RunnerParams(LazyModel):
    read: list[str]
    required: list[str]
    notes: list[str] = []


class RunnerInfo(LazyModel):
    ref: str
    task_kind: TaskKind
    description: str
    params: RunnerParams
