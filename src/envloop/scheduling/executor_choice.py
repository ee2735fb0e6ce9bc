"""The executor a worker sends its trials to (`el worker --executor`, `el serve --executor`): the
choices, the check made before anything starts, and the executor itself, Ray imported only when
chosen. Apart from `executor`, which the Ray executor imports for its contract."""

import os

from envloop.errors import UserError
from envloop.scheduling.executor import Executor, LocalExecutor

EXECUTORS = ("local", "ray")


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
