"""Paths as a command inside an environment names them (POSIX, absolute): whether one lies at or
below another. Written once for the Dockerfile plan, the container's host files, the tamper watch
and the tamper flags, which each ask it of paths they never resolve on this host."""


def within(path: str, root: str) -> bool:
    """Whether `path` is `root` or below it (`root` with or without a trailing slash)."""
    root = root.rstrip("/")
    return path == root or path.startswith(root + "/")


def overlap(one: str, other: str) -> bool:
    """Whether either path is the other or below it."""
    return within(one, other) or within(other, one)
