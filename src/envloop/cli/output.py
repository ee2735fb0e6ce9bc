"""Output conventions: with --json, stdout carries only the JSON document; everything else is stderr."""

import json
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table
from rich.text import Text

_UNBOUNDED = 100_000
"""The width of a console that is not a terminal (a pipe, a log file): no column is ever cut."""


def _console(*, stderr: bool) -> Console:
    """Text from tasks, verifiers and users is printed as it is: never read as Rich markup (a
    reason like `bad [/x] run` would crash the print) or emoji codes. Off a terminal, lines are
    never wrapped and table columns never cut, so piped output keeps full IDs."""
    console = Console(stderr=stderr, highlight=False, markup=False, emoji=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = _UNBOUNDED
    return console


err = _console(stderr=True)
out = _console(stderr=False)


def emit_json(value: BaseModel | Sequence[BaseModel] | dict[str, Any] | list[Any]) -> None:
    if isinstance(value, BaseModel):
        data: Any = value.model_dump(mode="json", by_alias=True)
    elif isinstance(value, list | tuple) and value and isinstance(value[0], BaseModel):
        data = [v.model_dump(mode="json", by_alias=True) for v in value if isinstance(v, BaseModel)]
    else:
        data = value
    sys.stdout.write(json.dumps(data, indent=2) + "\n")
    sys.stdout.flush()


def warn(message: str) -> None:
    err.print(Text.assemble(("warning:", "yellow"), " ", message))


def note(message: str) -> None:
    err.print(message, markup=False)


def when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "—"


def table(columns: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None) -> Table:
    grid = Table(*columns, title=title, title_justify="left", show_edge=False, pad_edge=False)
    for row in rows:
        grid.add_row(*("—" if cell is None else str(cell) for cell in row))
    return grid
