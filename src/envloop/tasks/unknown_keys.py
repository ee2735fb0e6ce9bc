"""task.toml keys no part of the task format knows, named at push with the closest known key.

Unknown keys are kept (a task written for a newer harness must still load), but a typo such as
`[agnet]` or `cpu = 2` would otherwise change what a run measures without a word: the agent's
timeout or the task's CPUs silently take their defaults.
"""

import difflib
from collections.abc import Iterator

from pydantic import BaseModel

from envloop.tasks.task_toml import TaskConfig

_FREE_FORM = frozenset({"metadata", "env"})
"""Tables whose keys are the author's own (metadata, environment variables)."""


def unknown_keys(config: TaskConfig) -> list[str]:
    """One line per unknown key, in file order: `unknown key [agnet] (did you mean [agent]?)`."""
    return list(_walk(config, ""))


def _walk(model: BaseModel, prefix: str) -> Iterator[str]:
    known = sorted(type(model).model_fields)
    for key, value in (model.model_extra or {}).items():
        yield _line(prefix, key, known, table=isinstance(value, dict))
    for name in type(model).model_fields:
        if name in _FREE_FORM:
            continue
        value = getattr(model, name)
        where = f"{prefix}{name}"
        if isinstance(value, BaseModel):
            yield from _walk(value, where + ".")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from _walk(item, f"{where}[{index}].")


def _line(prefix: str, key: str, known: list[str], *, table: bool) -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f" (did you mean {_shown(prefix, close[0], table)}?)" if close else ""
    return f"unknown task.toml key {_shown(prefix, key, table)}{hint}: kept, but nothing reads it"


def _shown(prefix: str, key: str, table: bool) -> str:
    name = f"{prefix}{key}"
    return f"[{name}]" if table else name
