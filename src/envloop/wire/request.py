"""What every operation's request shares (a frozen pydantic dataclass, built on first use), and the
requests of the operations that need only what they act on.

A request is a dataclass rather than a model so that its constructor takes the operation's
parameters in order, as the method of the same name on every client does (`get_job("job_…")`).
"""

import dataclasses
from collections.abc import Callable
from typing import Any

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass

REQUEST = ConfigDict(defer_build=True)


@dataclasses.dataclass(frozen=True)
class QueryForm:
    """How a request field that a URL query cannot carry as it is (a dict) travels as query
    parameters, marked in its annotation: under `name`, checked by the route as `annotation`, written
    by `encode`. The field's own validator reads the query form back (`ListJobs.tags`)."""

    name: str
    annotation: Any
    encode: Callable[[Any], Any]


@dataclass(config=REQUEST, frozen=True)
class NoArguments:
    """An operation on the calling project as a whole (a list of everything)."""


@dataclass(config=REQUEST, frozen=True)
class JobId:
    job_id: str


@dataclass(config=REQUEST, frozen=True)
class TrialId:
    trial_id: str


@dataclass(config=REQUEST, frozen=True)
class Ref:
    ref: str


__all__ = [
    "JobId",
    "NoArguments",
    "Ref",
    "TrialId",
]
