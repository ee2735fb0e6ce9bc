"""What `el runner list` shows about a runner: its task kind and the params it reads."""

from typing import Literal

from pydantic import BaseModel

TaskKind = Literal["harbor", "chat"]


class RunnerParams(BaseModel):
    read: list[str]
    required: list[str]
    notes: list[str] = []


class RunnerInfo(BaseModel):
    ref: str
    task_kind: TaskKind
    description: str
    params: RunnerParams
