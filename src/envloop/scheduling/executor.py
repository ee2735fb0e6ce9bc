"""Executors run one trial spec to an outcome. Local runs it in this process; a later one sends it to Ray."""

from typing import Protocol

from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.runners.registry import get_runner


class Executor(Protocol):
    async def execute(self, spec: TrialSpec) -> TrialOutcome: ...


class LocalExecutor:
    """Runs the trial's runner in this worker's event loop; cancelling the call cancels the trial."""

    async def execute(self, spec: TrialSpec) -> TrialOutcome:
        return await get_runner(spec.runner).run(spec)
