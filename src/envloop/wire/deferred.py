"""The wire models by name, each imported when first used: what `envloop.operations.declared` declares
its operations with, so importing the declarations (every client, every `el` command) builds none
of the models; `el job get` builds only the two of the operation it calls.

    from envloop.wire.deferred import JobId, JobView    # Deferred("JobId"), Deferred("JobView")

The type checker sees the real classes (so a declaration is still typed by its request's
constructor); at run time a name is a `Deferred` until `resolved` swaps in the model.
"""

from typing import TYPE_CHECKING, Any, get_args, get_origin

from envloop import wire

if TYPE_CHECKING:
    from envloop.wire import *  # noqa: F403 - the real classes, for the type checker only


class Deferred:
    """A model of `envloop.wire` named before its module is imported."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Deferred({self.name!r})"


def resolved(annotation: Any) -> Any:
    """`annotation` with each `Deferred` in it (also inside `list[...]`) replaced by its model."""
    if isinstance(annotation, Deferred):
        return getattr(wire, annotation.name)
    args = get_args(annotation)
    models = tuple(resolved(arg) for arg in args)
    return annotation if models == args else get_origin(annotation)[models]


def __getattr__(name: str) -> Deferred:
    if name not in wire.__all__:
        raise AttributeError(f"module 'envloop.wire' has no attribute {name!r}")
    return Deferred(name)
