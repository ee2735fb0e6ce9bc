"""The task.toml field tables, written from envloop's typed view of task.toml at build time.

`envloop.tasks.task_toml.TaskConfig` is what every push and every trial reads, so its fields, types,
defaults and bounds are the format's reference; the page shows them table by table.
"""

import types
from typing import Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from markdown_text import cell
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from envloop.tasks.task_toml import TaskConfig


def task_fields_markdown() -> str:
    """One table per task.toml table, in the order a reader meets them; a model reached again
    (`[steps.agent]` has `[agent]`'s fields) points at the table that shows it instead of repeating it."""
    lines: list[str] = []
    shown_at: dict[type[BaseModel], str] = {TaskConfig: ""}
    queue: list[tuple[str, type[BaseModel]]] = [("", TaskConfig)]
    while queue:
        table, model = queue.pop(0)
        rows = []
        for name, field in model.model_fields.items():
            inner, many = _section_model(field.annotation)
            if inner is None:
                meaning = ", ".join(filter(None, [field.description or "", _bounds(field.metadata)]))
                default = _default(field.default, field.default_factory)
                rows.append(f"| `{name}` | {_type(field.annotation)} | {default} | {cell(meaning)} |")
                continue
            if inner not in shown_at:
                shown_at[inner] = _path(table, name, many)
                queue.append((shown_at[inner], inner))
            kind = "array of tables" if many else "table"
            rows.append(f"| `{name}` | {kind}, see `{shown_at[inner]}` | | {cell(field.description or '')} |")
        lines += [f"### `{table}`" if table else "### Top level", ""]
        if model.__doc__ and model is not TaskConfig:
            lines += [" ".join(model.__doc__.split()), ""]
        lines += ["| field | type | default | meaning |", "|---|---|---|---|", *rows, ""]
    return "\n".join(lines)


def _path(table: str, name: str, many: bool) -> str:
    inside = table.strip("[]")
    dotted = f"{inside}.{name}" if inside else name
    return f"[[{dotted}]]" if many else f"[{dotted}]"


def _section_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The table model a field holds (directly, optionally, or as a list of tables)."""
    options = [arg for arg in _union_args(annotation) if arg is not type(None)]
    if len(options) != 1:
        return None, False
    only = options[0]
    if isinstance(only, type) and issubclass(only, BaseModel):
        return only, False
    if get_origin(only) is list:
        (item,) = get_args(only)
        if isinstance(item, type) and issubclass(item, BaseModel):
            return item, True
    return None, False


def _union_args(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def _type(annotation: Any) -> str:
    names = {str: "string", int: "integer", float: "number", bool: "boolean", object: "any value"}
    if annotation in names:
        return names[annotation]
    origin = get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(f'`"{value}"`' for value in get_args(annotation))
    if origin in (Union, types.UnionType):
        options = [_type(arg) for arg in get_args(annotation) if arg is not type(None)]
        return " or ".join(options)
    if origin is list:
        return f"array of {_type(get_args(annotation)[0])}"
    if origin is dict:
        return f"table of {_type(get_args(annotation)[1])}"
    return getattr(annotation, "__name__", str(annotation))


def _default(default: Any, factory: Any) -> str:
    if factory is not None:
        value = factory()
        return "" if isinstance(value, BaseModel) else f"`{value!r}`".replace("{}", "{ }")
    if default is PydanticUndefined:
        return "required"
    if default is None:
        return ""
    return f'`"{default}"`' if isinstance(default, str) else f"`{default!r}`"


def _bounds(metadata: list[Any]) -> str:
    symbols = {Gt: ("> ", "gt"), Ge: ("≥ ", "ge"), Lt: ("< ", "lt"), Le: ("≤ ", "le")}
    found = []
    for item in metadata:
        for kind, (symbol, attribute) in symbols.items():
            if isinstance(item, kind):
                found.append(f"{symbol}{getattr(item, attribute)}")
        if isinstance(item, MinLen) and item.min_length:
            found.append("not empty")
        if isinstance(item, MaxLen):
            found.append(f"at most {item.max_length} characters")
        if pattern := getattr(item, "pattern", None):
            found.append(f"matches `{pattern}`")
    return ", ".join(found)
