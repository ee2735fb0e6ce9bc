"""`module:Attr` references in profiles and pushes, and the rule that keeps them safe.

A profile is API input: importing whatever module it names would let any caller run code on the
server and on every worker. So a reference resolves only to a module that the operator chose:

- a module of an installed envloop plugin (a distribution that declares an entry point in one of
  the `envloop.*` groups), or
- a module listed in `ENVLOOP_PLUGIN_MODULES` (comma-separated module names; `mypkg` allows
  `mypkg` and everything under it) in the environment of the process that resolves it: the
  server when a job is submitted, each worker when it runs a trial.

Anything else is refused before any import happens.
"""

import importlib
import importlib.metadata
import re
from functools import cache

from envloop.plugins.errors import ComponentError, one_line
from envloop.settings import env_name, settings

ALLOW_VARIABLE = env_name("plugin_modules")
GROUPS = ("envloop.agents", "envloop.runners", "envloop.scorers", "envloop.environments")

_REFERENCE = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):([A-Za-z_]\w*)$")


def is_reference(name: str) -> bool:
    return ":" in name


@cache
def plugin_packages() -> frozenset[str]:
    """Top-level packages of the installed distributions that declare an envloop entry point."""
    declaring: set[str] = set()
    for group in GROUPS:
        for point in importlib.metadata.entry_points(group=group):
            if point.dist is not None:
                declaring.add(_normal(point.dist.name))
    packages = importlib.metadata.packages_distributions()
    return frozenset(
        package for package, dists in packages.items() if any(_normal(d) in declaring for d in dists)
    )


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _allowed_by_operator(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in settings().plugin_modules)


def resolve(reference: str, kind: str) -> object:
    """The object `module:Attr` names, imported only when the rule above allows it."""
    shown = reference[:120]
    match = _REFERENCE.fullmatch(reference)
    if match is None:
        raise ComponentError(f"{kind} reference {shown!r} is not of the form module.path:Name")
    module, attribute = match.groups()
    if module.split(".")[0] not in plugin_packages() and not _allowed_by_operator(module):
        raise ComponentError(
            f"{kind} reference {shown!r} is not allowed: module:Name references resolve only to installed "
            f"envloop plugins or to modules the operator lists in {ALLOW_VARIABLE}"
        )
    try:
        loaded = importlib.import_module(module)
    except Exception as exc:  # any failure of someone else's module is reported, one line
        raise ComponentError(f"{kind} reference {shown!r} does not import: {one_line(exc)}") from None
    found = getattr(loaded, attribute, None)
    if found is None:
        raise ComponentError(f"{kind} reference {shown!r}: module {module} has no {attribute}")
    return found
