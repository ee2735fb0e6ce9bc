"""Where `el` sends its operations: the embedded store, or a server when ENVLOOP_URL is set.

Both sides are clients with the same operations, names and return types (`envloop.operations`):
`envloop.LocalClient` on this process's store, `envloop.Client` over HTTP, so every command renders
the same output either way. Each is imported only when a command first asks for it: a command
against a server never loads the store, and `el --help` loads neither.
"""

from typing import TYPE_CHECKING

from envloop.cli.state import context
from envloop.operations import Operations
from envloop.settings import settings

if TYPE_CHECKING:
    from envloop.client import Client
    from envloop.local import LocalClient

_remote: "Client | None" = None


def remote() -> "Client | None":
    """The server client when ENVLOOP_URL is set (the client is imported only then)."""
    global _remote  # noqa: PLW0603 - one connection per CLI process
    if _remote is None and settings().url:
        from envloop.client import Client  # noqa: PLC0415

        _remote = Client()
    return _remote


def operations() -> Operations:
    client = remote()
    return client if client is not None else embedded()


def embedded(*, run_trials: bool = False, capacity: int | None = None) -> "LocalClient":
    """The client on this process's store. `run_trials` (`el job submit`): a submission starts a
    background worker for its trials, of `capacity` trials at once if it starts one."""
    from envloop.local import LocalClient  # noqa: PLC0415

    return LocalClient.on_context(context(light=True), run_trials=run_trials, capacity=capacity)


__all__ = ["Operations", "embedded", "operations", "remote"]
