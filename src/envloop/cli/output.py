"""Output conventions: with --json, stdout carries only the JSON document; everything else is stderr."""

import json
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

err = Console(stderr=True, highlight=False)
out = Console(highlight=False, soft_wrap=True)


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
    err.print(f"[yellow]warning:[/] {message}", markup=True)


def note(message: str) -> None:
    err.print(message, markup=False)


def when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "—"


def table(columns: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None) -> Table:
    grid = Table(*columns, title=title, title_justify="left", show_edge=False, pad_edge=False)
    for row in rows:
        grid.add_row(*("—" if cell is None else str(cell) for cell in row))
    return grid
