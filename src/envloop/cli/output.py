"""Output conventions: with --json, stdout carries only the JSON document; everything else is stderr."""

import json
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from envloop.cli.layout import fit, wrap

_UNBOUNDED = 100_000
"""The width of a console that is not a terminal (a pipe, a log file): no column is ever cut."""


def _console(*, stderr: bool) -> Console:
    """Text from tasks, verifiers and users is printed as it is: never read as Rich markup (a
    reason like `bad [/x] run` would crash the print) or emoji codes. Off a terminal, lines are
    never wrapped and table columns never cut, so piped output keeps full IDs; in one, long lines
    wrap between words."""
    console = Console(stderr=stderr, highlight=False, markup=False, emoji=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = _UNBOUNDED
    else:
        console.soft_wrap = False  # a long line wraps between words, not wherever the terminal cuts
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


def table(
    columns: Sequence[str],
    rows: Sequence[Sequence[object]],
    title: str | None = None,
    drop_first: Sequence[str] = (),
) -> Table:
    """A table that never breaks a word or an ID. In a terminal too narrow for every column, the
    columns named in `drop_first` (the least needed first), then others from the right, are left out
    and named below the table; `--json` has them all. Off a terminal (a pipe, a file) it is plain
    text sized to its content: no rules, nothing wrapped or left out."""
    cells = [["—" if cell is None else str(cell) for cell in row] for row in rows]
    if not out.is_terminal:
        if (lines := _plain_lines(columns, cells, title)) is not None:
            return PlainTable(lines)
        plain = Table(*columns, title=title, title_justify="left", box=None, pad_edge=False)
        for row in cells:
            plain.add_row(*row)
        return plain
    fitted = fit(list(columns), cells, out.width, drop_first)
    left_out = [name for index, name in enumerate(columns) if index not in fitted.shown]
    caption = (
        f"not shown at this width: {', '.join(left_out)} (--json has every column)" if left_out else None
    )
    grid = Table(
        *(wrap(columns[i], fitted.widths[i]) for i in fitted.shown),
        title=title,
        title_justify="left",
        caption=caption,
        caption_justify="left",
        show_edge=False,
        pad_edge=False,
    )
    for column, index in zip(grid.columns, fitted.shown, strict=True):
        column.min_width = column.max_width = fitted.widths[index]
        column.no_wrap = True
    for row in cells:
        grid.add_row(*(wrap(row[i], fitted.widths[i]) if i < len(row) else "" for i in fitted.shown))
    return grid


class PlainTable(Table):
    """A table already laid out as lines of plain text: what Rich prints of a borderless table off a
    terminal, without Rich laying out every cell (a 10,000-row `el trial list` into a file took
    seconds; the rows of a 300-task result a tenth of one)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines:
            yield Segment(line)
            yield Segment.line()

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max((cell_len(line) for line in self.lines), default=0)
        return Measurement(widest, widest)


def _plain_lines(columns: Sequence[str], cells: list[list[str]], title: str | None) -> list[str] | None:
    """The lines of a borderless table: each cell padded to its column's width, two spaces between
    columns, the title alone above. None for what only Rich lays out the same (text that is not
    printable, such as a newline in a cell; a column with no text at all; rows of another length
    than the header; a console that writes colour off a terminal), which the caller renders with
    Rich."""
    texts = [*columns, title or "", *(cell for row in cells for cell in row)]
    if out.color_system is not None or any(len(row) != len(columns) for row in cells):
        return None
    if not all(text.isprintable() for text in texts):
        return None
    widths = [max(cell_len(text) for text in column) for column in zip(columns, *cells, strict=True)]
    if 0 in widths:  # Rich narrows padding around an empty column its own way
        return None
    lines = [title] if title else []
    for row in (columns, *cells):
        lines.append(
            "  ".join(text + " " * (width - cell_len(text)) for text, width in zip(row, widths, strict=True))
        )
    return lines
