"""envloop: self-hosted evaluation of AI models and agents.

    import envloop
    with envloop.Client() as client: ...            # a server (ENVLOOP_URL, ENVLOOP_API_KEY)
    with envloop.LocalClient() as client: ...       # this machine's store, no server needed

Both clients offer the same operations (`envloop.operations.Operations`) and return the models of
`envloop.wire`.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envloop.client import Client
    from envloop.local import LocalClient

__version__ = "0.1.0"
__all__ = ["Client", "LocalClient", "__version__"]


def __getattr__(name: str) -> Any:
    """The clients are imported on first use: the CLI, which imports this package, never needs the
    HTTP client, and only LocalClient needs the store."""
    if name == "Client":
        from envloop.client import Client  # noqa: PLC0415

        return Client
    if name == "LocalClient":
        from envloop.local import LocalClient  # noqa: PLC0415

        return LocalClient
    raise AttributeError(f"module 'envloop' has no attribute {name!r}")
