"""Executors run one trial spec to an outcome: LocalExecutor in this process, RayExecutor
(envloop.scheduling.ray_executor) on a Ray cluster; `executor_choice` picks one."""

from typing import Protocol

from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.runners.registry import get_runner


class RunLost(Exception):
    """The run ended for a reason outside the trial (the machine running it died): the worker hands
    the trial back to the queue for a new run instead of recording an outcome."""


class Executor(Protocol):
    async def execute(self, spec: TrialSpec) -> TrialOutcome:
        """Run the trial; its kept files end up in `spec.artifacts_dir` on this machine."""
        ...


class LocalExecutor:
    """Runs the trial's runner in this worker's event loop; cancelling the call cancels the trial."""

    async def execute(self, spec: TrialSpec) -> TrialOutcome:
        return await get_runner(spec.runner).run(spec)
