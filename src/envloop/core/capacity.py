"""How many trials a worker runs at once when nobody chose: light to import, for the CLI's options."""

import os

CAPACITY_ENV = "ENVLOOP_WORKER_CAPACITY"
"""Trials at once for a worker started without `--capacity` (`el worker`, the one `el job submit`
starts, `el serve`'s); unset: max(2, cores)."""


def default_capacity() -> int:
    """Trials at once when nobody chose: every core busy, and at least two."""
    return max(2, os.cpu_count() or 2)
