"""A catalog of one kind of component: the built-ins, the plugins installed under the kind's entry
point group, and `module:Name` references (see `references` for what may be imported).

Plugins are found lazily: looking up a built-in never imports a plugin, so a broken plugin cannot
break a command that does not use it. A plugin that fails to import, has the wrong shape, or takes
a built-in's name (or another plugin's) is left out and reported as one line naming the
distribution and the entry point; looking up its name says why it is missing.
"""

import importlib.metadata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from threading import Lock
from typing import Generic, TypeVar

from envloop.plugins.errors import ComponentError, one_line
from envloop.plugins.references import is_reference, resolve
from envloop.wire.runners import Origin

T = TypeVar("T")


@dataclass(frozen=True)
class Found(Generic[T]):
    name: str
    component: T
    origin: Origin


class ShapeError(ValueError):
    """An object that does not fit the kind's protocol; the message says what is missing."""


class Catalog(Generic[T]):
    """Components of one kind, by name. `adopt` turns what an entry point or reference loads into
    a component (instantiating a class), or raises ShapeError."""

    def __init__(
        self,
        kind: str,
        group: str,
        builtins: Callable[[], dict[str, T]],
        adopt: Callable[[object], T],
    ) -> None:
        self.kind = kind
        self.group = group
        self._builtins_factory = builtins
        self._adopt = adopt
        self._lock = Lock()
        self._builtins: dict[str, T] | None = None
        self._plugins: dict[str, Found[T]] | None = None
        self._failed: dict[str, str] = {}
        self._problems: list[str] = []
        self._references: dict[str, Found[T]] = {}

    def builtins(self) -> dict[str, T]:
        if self._builtins is None:
            self._builtins = self._builtins_factory()
        return self._builtins

    def _load_plugins(self) -> dict[str, Found[T]]:
        with self._lock:
            if self._plugins is None:
                self._plugins = dict(self._discover())
            return self._plugins

    def _discover(self) -> Iterator[tuple[str, Found[T]]]:
        builtins = self.builtins()
        seen: dict[str, str] = {}
        for point in sorted(importlib.metadata.entry_points(group=self.group), key=lambda p: p.name):
            dist = point.dist
            dist_name, version = (dist.name, dist.version) if dist is not None else ("?", "?")
            where = f"plugin {dist_name} {version}: entry point {self.group}:{point.name} ({point.value})"
            if point.name in builtins:
                self._report(point.name, f"{where} takes the name of the built-in {self.kind}; ignored")
                continue
            if point.name in seen:
                self._report(point.name, f"{where} takes a name {seen[point.name]} already provides; ignored")
                continue
            seen[point.name] = f"{dist_name} {version}"
            try:
                component = self._adopt(point.load())
            except ShapeError as exc:
                self._report(point.name, f"{where} is not a{_n(self.kind)} {self.kind}: {exc}")
                continue
            except Exception as exc:  # a plugin that cannot load must not break envloop
                self._report(point.name, f"{where} failed to load: {one_line(exc)}")
                continue
            origin = Origin(source="plugin", distribution=dist_name, version=version, entry_point=point.value)
            yield point.name, Found(point.name, component, origin)

    def _report(self, name: str, problem: str) -> None:
        self._problems.append(problem)
        self._failed.setdefault(name, problem)

    def all(self) -> list[Found[T]]:
        """Every usable component: the built-ins in their own order, then the plugins by name."""
        builtin = [Found(n, c, Origin(source="built-in")) for n, c in self.builtins().items()]
        return builtin + sorted(self._load_plugins().values(), key=lambda f: f.name)

    def names(self) -> list[str]:
        return [found.name for found in self.all()]

    def problems(self) -> list[str]:
        self._load_plugins()
        return list(self._problems)

    def find(self, name: str) -> Found[T]:
        """The component `name` (or the `module:Name` reference) names; ComponentError saying why not."""
        builtin = self.builtins().get(name)
        if builtin is not None:
            return Found(name, builtin, Origin(source="built-in"))
        if is_reference(name):
            return self._reference(name)
        found = self._load_plugins().get(name)
        if found is not None:
            return found
        if name in self._failed:
            raise ComponentError(self._failed[name])
        shown = name if len(name) <= 80 else name[:80] + "…"
        raise ComponentError(f"unknown {self.kind} {shown!r} (known: {', '.join(self.names())})")

    def _reference(self, reference: str) -> Found[T]:
        cached = self._references.get(reference)
        if cached is not None:
            return cached
        loaded = resolve(reference, self.kind)
        try:
            component = self._adopt(loaded)
        except ShapeError as exc:
            raise ComponentError(
                f"{self.kind} reference {reference!r} is not a{_n(self.kind)} {self.kind}: {exc}"
            ) from None
        except Exception as exc:  # constructing someone else's class may fail any way
            raise ComponentError(
                f"{self.kind} reference {reference!r} failed to load: {one_line(exc)}"
            ) from None
        found = Found(reference, component, Origin(source="reference", entry_point=reference))
        self._references[reference] = found
        return found


def _n(kind: str) -> str:
    return "n" if kind[:1] in "aeiou" else ""


def instantiate(loaded: object) -> object:
    """A class is instantiated without arguments; anything else is taken as it is."""
    if isinstance(loaded, type):
        try:
            return loaded()
        except TypeError as exc:
            raise ShapeError(f"{loaded.__name__}() takes arguments ({exc})") from None
    return loaded
