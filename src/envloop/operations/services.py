"""The service modules that do the declared operations, named before any of them is imported.

A declaration writes `service=services.job_submission.submit_job` (`envloop.operations.declared`).
The type checker and an editor see the function itself, through the imports below, so "go to
definition" lands on it and mypy checks that it exists. At run time `services.job_submission` is a
`ServiceModule` and `.submit_job` a `ServiceFunction`, which imports its module when the operation
is first done: a client that only sends requests (`envloop.Client`, `el` against a server) never
loads the store.
"""

import importlib
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envloop.services import (
        breakdown,
        compare,
        components,
        dataset_checks,
        datasets,
        diagnosis,
        job_reads,
        job_submission,
        jobs,
        keys,
        leaderboard,
        planning,
        profiles,
        results,
        rollouts,
        samples,
        shares,
        trace,
        trial_reads,
        trials,
        usage,
    )

PACKAGE = "envloop.services"
"""Where the service modules are: `services.jobs` names `envloop.services.jobs`."""


class ServiceFunction:
    """A function of a service module, imported when first called."""

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    @cached_property
    def function(self) -> Callable[..., Any]:
        found: Callable[..., Any] = getattr(importlib.import_module(self.module), self.name)
        return found

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{self.module}.{self.name}"


class ServiceModule:
    """A service module by name; each of its attributes is a `ServiceFunction`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, function: str) -> ServiceFunction:
        if function.startswith("_"):
            raise AttributeError(function)
        return ServiceFunction(self.name, function)


if not TYPE_CHECKING:  # the type checker sees the modules themselves (above)

    def __getattr__(name: str) -> ServiceModule:
        if name.startswith("_"):
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return ServiceModule(f"{PACKAGE}.{name}")


__all__ = [
    "PACKAGE",
    "ServiceFunction",
    "ServiceModule",
    "breakdown",
    "compare",
    "components",
    "dataset_checks",
    "datasets",
    "diagnosis",
    "job_reads",
    "job_submission",
    "jobs",
    "keys",
    "leaderboard",
    "planning",
    "profiles",
    "results",
    "rollouts",
    "samples",
    "shares",
    "trace",
    "trial_reads",
    "trials",
    "usage",
]
