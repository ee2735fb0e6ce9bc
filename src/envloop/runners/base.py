"""The Runner protocol: the versioned harness that takes one TrialSpec from setup to teardown.

A runner declares which profile params it reads and requires, so submission can refuse a profile
that lacks a required param and warn about params that would have no effect.
"""

from collections.abc import Mapping
from typing import Protocol

from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.wire.runners import RunnerInfo, RunnerParams, TaskKind

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = ["RunnerInfo", "RunnerParams", "TaskKind"]


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
