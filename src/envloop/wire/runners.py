"""What `el runner list` shows about a runner: its task kind and the params it reads."""

from typing import Literal

from envloop.wire.base import WireModel

TaskKind = Literal["harbor", "chat"]


class RunnerParams(WireModel):
    read: list[str]
    required: list[str]
    notes: list[str] = []


class RunnerInfo(WireModel):
    ref: str
    task_kind: TaskKind
    description: str
    params: RunnerParams
