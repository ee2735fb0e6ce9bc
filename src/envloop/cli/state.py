"""The embedded installation, opened once per command and only when a command needs it."""

from envloop.services.context import Context, open_context

_context: Context | None = None


def context() -> Context:
    global _context  # noqa: PLW0603 - one store handle per CLI process
    if _context is None:
        _context = open_context()
    return _context
