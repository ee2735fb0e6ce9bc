"""Output conventions: with --json, stdout carries only the JSON document; everything else is stderr."""

import json
import re
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


_SEPARATION = 3
"""Columns are set apart by a padding of one on each side and a rule."""
_ID = re.compile(r"^[a-z]{2,8}_[0-9a-z]{22}$")
"""An envloop ID (`core.ids`): a table never cuts or wraps one, whatever the terminal's width."""


def table(columns: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None) -> Table:
    """A table whose ID columns always show whole IDs (they all share a prefix, so a cut one is
    useless); when the terminal is too narrow for every cell, the other columns share the width
    left and wrap, in the middle of a word if they must, instead of being cut off."""
    grid = Table(*columns, title=title, title_justify="left", show_edge=False, pad_edge=False)
    cells = [["—" if cell is None else str(cell) for cell in row] for row in rows]
    natural: dict[int, int] = {}
    left = out.width
    for index, column in enumerate(grid.columns):
        texts = [row[index] for row in cells if index < len(row)]
        ids = [len(word) for text in texts for word in text.split() if _ID.match(word)]
        left -= _SEPARATION
        if ids:
            column.min_width = max(ids)  # wide enough for each ID; several wrap between IDs
            left -= column.min_width
        else:
            natural[index] = max(
                (len(line) for text in [column.header, *texts] for line in str(text).splitlines()), default=1
            )
    # The narrowest columns get all they need first; the rest share what remains equally.
    for position, index in enumerate(sorted(natural, key=natural.__getitem__)):
        share = max(left // (len(natural) - position), 1)
        width = min(natural[index], share)
        grid.columns[index].max_width = width
        grid.columns[index].overflow = "fold"
        left -= width
    for row in cells:
        grid.add_row(*row)
    return grid
