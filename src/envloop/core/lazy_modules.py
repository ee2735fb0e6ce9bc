"""Modules loaded on first attribute access, for a module that names many but uses few per process."""

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """`name`, imported now if it already was, else when one of its attributes is first read
    (the standard library's `importlib.util.LazyLoader`). `envloop.local` names every service
    module while a command calls one or two; the others (SQLAlchemy, the runners) stay unloaded."""
    found = sys.modules.get(name)
    if found is not None:
        return found
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
