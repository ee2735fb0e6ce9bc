"""Executors run one trial spec to an outcome: LocalExecutor in this process, RayExecutor
(envloop.scheduling.ray_executor) on a Ray cluster."""

import os
from typing import Protocol

from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.errors import UserError
from envloop.runners.registry import get_runner

EXECUTORS = ("local", "ray")


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


def check_executor(kind: str, ray_address: str | None) -> None:
    """Refuse an executor choice that cannot be right, before anything starts (`el worker`, `el serve`)."""
    if kind not in EXECUTORS:
        raise UserError(f"--executor {kind[:40]!r}: expected {' or '.join(EXECUTORS)}")
    if kind == "local" and ray_address is not None:
        raise UserError("--ray-address goes with --executor ray")


def choose_executor(kind: str, ray_address: str | None) -> tuple[Executor, int | None]:
    """The executor `el worker --executor KIND` names, and the capacity it suggests when none is
    given (a Ray cluster's CPUs; None: the worker's default). Ray is imported only when chosen."""
    check_executor(kind, ray_address)
    if kind == "local":
        return LocalExecutor(), None
    if kind == "ray":
        from envloop.scheduling.ray_executor import RayExecutor  # noqa: PLC0415

        executor = RayExecutor(ray_address or os.environ.get("RAY_ADDRESS") or "auto")
        return executor, max(1, executor.cluster_cpus())
    raise UserError(f"--executor {kind[:40]!r}: expected {' or '.join(EXECUTORS)}")
