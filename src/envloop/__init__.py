"""envloop: self-hosted evaluation of AI models and agents."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envloop.client import Client

__version__ = "0.1.0"
__all__ = ["Client", "__version__"]


def __getattr__(name: str) -> Any:
    """`envloop.Client` is imported on first use: the CLI, which imports this package, never needs
    the HTTP client and should not pay for importing it."""
    if name == "Client":
        from envloop.client import Client  # noqa: PLC0415

        return Client
    raise AttributeError(f"module 'envloop' has no attribute {name!r}")
