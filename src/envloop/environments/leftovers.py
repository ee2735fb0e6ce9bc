"""What instances of dead workers left behind, swept when a worker starts: each provider in the
catalog that has a `sweep_leftovers` hook removes its own (Docker: the containers and networks of
workers on this host that are gone). The scheduler calls this one function and names no provider."""

import logging

from envloop.environments.catalog import ENVIRONMENT_PROVIDERS

log = logging.getLogger(__name__)


async def sweep_leftovers() -> list[str]:
    """The names of what every provider's sweep removed. A plugin's sweep that fails is logged and
    skipped: one broken plugin must not stop a worker from starting."""
    removed: list[str] = []
    for found in ENVIRONMENT_PROVIDERS.all():
        sweep = found.component.sweep_leftovers
        if sweep is None:
            continue
        try:
            removed += await sweep()
        except Exception as exc:  # a plugin's sweep may fail any way; the worker starts regardless
            log.warning("environment %s: its leftovers could not be swept: %s", found.name, exc)
    return removed
