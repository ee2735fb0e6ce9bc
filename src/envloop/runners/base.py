"""The Runner protocol: the versioned harness that takes one TrialSpec from setup to teardown.

A runner declares which profile params it reads and requires, so submission can refuse a profile
that lacks a required param and warn about params that would have no effect.
"""

from collections.abc import Mapping
from typing import Literal, Protocol

from pydantic import BaseModel

from envloop.core.trial import TrialOutcome, TrialSpec

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


class Runner(Protocol):
    ref: str
    task_kind: TaskKind
    description: str

    def params_info(self) -> RunnerParams: ...

    def check_params(self, params: Mapping[str, str]) -> list[str]:
        """Problems that make the params unusable, one sentence each; empty when fine."""
        ...

    def unread_params(self, params: Mapping[str, str]) -> list[str]:
        """Names of params this runner would ignore (submission warns that they have no effect)."""
        ...

    async def run(self, spec: TrialSpec) -> TrialOutcome:
        """Never raises for a trial's own failures; only cancellation propagates."""
        ...
