"""Modules imported on first use, for a module that names many but uses few per process."""

import importlib
from typing import Any


class LazyModule:
    """Stands for the module `name` and imports it when one of its attributes is first read.

    `envloop.local` names every service module while a command calls one or two; the others (and
    SQLAlchemy behind them) stay unloaded. Each read goes through `importlib.import_module`, which
    holds the import lock, so threads that first use a module at once import it once."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy_module(name: str) -> Any:
    return LazyModule(name)
