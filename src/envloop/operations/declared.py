"""The declared operations: one `Operation` each (see `envloop.operations.operation`).

Each is a method of both clients (`envloop.operations.Operations`), a route of the HTTP API, and a
call of its service function in process. Each is declared in the module of its topic
(`declared_inputs`, `declared_jobs`, `declared_trials`, `declared_access`); `Declarations` holds
them all. Adding an operation is one declaration there, its request in `envloop.wire` when no
existing one fits, and its service function (named through `envloop.operations.services`);
docs/design/operations.md lists the files it touches.

The models are named through `envloop.wire.deferred`: an operation imports its request and answer
when first called, so a client that makes one call (an `el` command) builds only that call's models.
"""

from typing import Any

from envloop.operations.declared_access import SharedOperations
from envloop.operations.declared_inputs import InputOperations
from envloop.operations.declared_jobs import JobOperations
from envloop.operations.declared_trials import TrialOperations
from envloop.operations.operation import Operation


class Declarations(InputOperations, JobOperations, TrialOperations, SharedOperations):
    """The operations declared once; `envloop.operations.Operations` inherits them as methods."""


def declared_operations() -> list[Operation[..., Any, Any]]:
    """Every declared operation, in declaration order: topic by topic, as `Declarations` names them."""
    return [
        value
        for topic in Declarations.__bases__
        for value in vars(topic).values()
        if isinstance(value, Operation)
    ]
