"""What this installation can run: every agent, runner, JSONL scorer and environment provider,
where each came from (built-in, an installed plugin's distribution and version, or a reference),
and the plugins that could not be used, one line each."""

from typing import Any, Literal

from pydantic import BaseModel

from envloop.agents import AGENTS
from envloop.core.trial import BUILTIN_ENVIRONMENTS
from envloop.environments.catalog import ENVIRONMENT_PROVIDERS
from envloop.errors import UserError
from envloop.plugins import Catalog, ComponentError, Origin
from envloop.runners import registry
from envloop.runners.registry import RUNNERS
from envloop.services.context import Context
from envloop.tasks.scorers import SCORER_CATALOG
from envloop.wire.runners import RunnerInfo

ComponentKind = Literal["agent", "runner", "scorer", "environment"]


class InstalledComponent(BaseModel):
    kind: ComponentKind
    name: str
    origin: Origin


class InstalledComponents(BaseModel):
    components: list[InstalledComponent]
    problems: list[str]
    """Plugins left out: failed to import, wrong shape, or a name already taken."""


def _catalogs() -> list[tuple[ComponentKind, Catalog[Any]]]:
    return [
        ("agent", AGENTS),
        ("runner", RUNNERS),
        ("scorer", SCORER_CATALOG),
        ("environment", ENVIRONMENT_PROVIDERS),
    ]


def installed_components(kind: ComponentKind | None = None) -> InstalledComponents:
    components: list[InstalledComponent] = []
    problems: list[str] = []
    for each, catalog in _catalogs():
        if kind is not None and each != kind:
            continue
        components += [InstalledComponent(kind=each, name=f.name, origin=f.origin) for f in catalog.all()]
        problems += catalog.problems()
    return InstalledComponents(components=components, problems=problems)


def check_environment(name: str) -> None:
    """UserError unless `name` is a built-in environment choice or an installed environment plugin."""
    if name in BUILTIN_ENVIRONMENTS:
        return
    try:
        ENVIRONMENT_PROVIDERS.find(name)
    except ComponentError as exc:
        shown = f"--environment {name[:40]!r}"
        if not str(exc).startswith("unknown"):
            raise UserError(f"{shown}: {exc}") from None
        known = [
            *BUILTIN_ENVIRONMENTS,
            *(n for n in ENVIRONMENT_PROVIDERS.names() if n not in BUILTIN_ENVIRONMENTS),
        ]
        raise UserError(f"{shown}: expected {', '.join(known[:-1])} or {known[-1]}") from None


def list_runners(ctx: Context) -> list[RunnerInfo]:
    """The runners this installation can run, with the profile params each reads and requires: the
    same for every project."""
    return registry.list_runners()
