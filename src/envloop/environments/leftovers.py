"""What instances of dead workers left behind, swept when a worker starts: each provider in the
catalog that has a `sweep_leftovers` hook removes its own (Docker: the containers and networks of
workers on this host that are gone), and what a worker's trials shared, closed when it stops
(`close_shared`). The scheduler calls these two functions and names no provider."""

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


async def close_shared() -> list[str]:
    """Close what each provider's trials shared on this worker; the problems met."""
    problems: list[str] = []
    for found in ENVIRONMENT_PROVIDERS.all():
        close = found.component.close_shared
        if close is None:
            continue
        try:
            problems += await close()
        except Exception as exc:  # as for the sweep: one provider's failure stops no other
            problems.append(f"environment {found.name}: what its trials shared could not be closed: {exc}")
    return problems
