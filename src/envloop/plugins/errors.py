"""The one error a lookup of a component raises, and how a plugin's failure becomes one line."""


class ComponentError(ValueError):
    """A name or reference that names no usable component here; the message says why, one line."""


def one_line(exc: BaseException, limit: int = 300) -> str:
    """`Type: message` on one line, cut at `limit` characters (a plugin's error may be anything)."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[:limit] + "…"
