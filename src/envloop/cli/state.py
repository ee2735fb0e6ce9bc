"""The embedded installation, opened once per command and only when a command needs it (the store
and its dependencies are imported then too, so commands that never open it never load them)."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envloop.services.context import Context

_context: "Context | None" = None


def context() -> "Context":
    global _context  # noqa: PLW0603 - one store handle per CLI process
    if _context is None:
        from envloop.services.context import open_context  # noqa: PLC0415

        _context = open_context(light=True)
    return _context
