"""Runner references → runners. A reference names an exact, versioned behaviour (`envloop/shell@1`);
plugins add runners under the entry point group `envloop.runners`, named by their reference."""

import inspect
from typing import get_args

from pydantic import BaseModel

from envloop.core.params import params_schema
from envloop.plugins import Catalog, ComponentError, ShapeError, instantiate
from envloop.runners.base import Runner, RunnerInfo, TaskKind
from envloop.runners.chat import ChatRunner
from envloop.runners.shell import ShellRunner


class UnknownRunnerError(ValueError):
    """A runner reference that this installation does not provide."""


def _builtins() -> dict[str, Runner]:
    return {ChatRunner.ref: ChatRunner(), ShellRunner.ref: ShellRunner()}


def adopt_runner(loaded: object) -> Runner:
    """A runner plugin is a class (instantiated without arguments) or an instance with `ref`,
    `task_kind` (harbor or chat), `description`, `params_model`, `param_readers`, `components`
    and an async `run(spec)`."""
    runner = instantiate(loaded)
    if not all(isinstance(getattr(runner, name, None), str) for name in ("ref", "description")):
        raise ShapeError("it has no ref and description strings")
    if getattr(runner, "task_kind", None) not in get_args(TaskKind):
        raise ShapeError("its task_kind is neither harbor nor chat")
    model = getattr(runner, "params_model", None)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise ShapeError("its params_model is not a pydantic model")
    if not all(callable(getattr(runner, name, None)) for name in ("param_readers", "components")):
        raise ShapeError("it has no param_readers(params) and components() methods")
    if not inspect.iscoroutinefunction(getattr(runner, "run", None)):
        raise ShapeError("it has no async run(spec) method")
    return runner  # type: ignore[return-value]  # checked above, member by member


RUNNERS: Catalog[Runner] = Catalog("runner", "envloop.runners", _builtins, adopt_runner)


def get_runner(ref: str) -> Runner:
    if ":" in ref:
        # A runner is pinned by a dataset for good: only installed, versioned references name one.
        raise UnknownRunnerError(
            f"unknown runner {ref[:80]!r}: runners are named by reference, not module:Name"
        )
    try:
        found = RUNNERS.find(ref)
    except ComponentError as exc:
        raise UnknownRunnerError(str(exc)) from None
    if found.component.ref != ref:
        raise UnknownRunnerError(f"runner plugin {ref!r} calls itself {found.component.ref!r}")
    return found.component


def list_runners() -> list[RunnerInfo]:
    return [
        RunnerInfo(
            ref=found.name,
            task_kind=found.component.task_kind,
            description=found.component.description,
            origin=found.origin,
            params_schema=params_schema(found.component.params_model),
            agents=found.component.components(),
        )
        for found in sorted(RUNNERS.all(), key=lambda f: f.name)
    ]
