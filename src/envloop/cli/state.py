"""The embedded installation, opened once per command and only when a command needs it (the store
and its dependencies are imported then too, so commands that never open it never load them)."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envloop.store.context import Context

_context: "Context | None" = None


def context(light: bool = False) -> "Context":
    """The installation; `light` for a command whose operations may only read (`cli.backend`): an
    embedded store is then opened with `sqlite3` alone until something asks for the full store.
    A server or a worker (many threads at once) asks without it and gets the full store."""
    global _context  # noqa: PLW0603 - one store handle per CLI process
    if _context is None:
        from envloop.services.context import open_context  # noqa: PLC0415

        _context = open_context(light=light)
    elif not light:
        _context.store  # noqa: B018 - opens the full store now, so every read goes through it
    return _context
