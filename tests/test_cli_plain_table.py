"""Off a terminal, a table is laid out as plain lines without Rich: the same text Rich prints of the
borderless table, at a fraction of its cost, and Rich itself for whatever it lays out differently."""

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

from envloop.cli import output

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


def _printed(renderable: object) -> str:
    console = Console(
        file=io.StringIO(), width=100_000, highlight=False, markup=False, emoji=False, soft_wrap=True
    )
    console.print(renderable)
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


def _by_rich(columns: list[str], rows: list[list[str]], title: str | None) -> str:
    table = Table(*columns, title=title, title_justify="left", box=None, pad_edge=False)
    for row in rows:
        table.add_row(*row)
    return _printed(table)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=1, max_value=4).flatmap(
        lambda width: st.tuples(
            st.lists(_TEXT, min_size=width, max_size=width),
            st.lists(st.lists(_TEXT, min_size=width, max_size=width), max_size=5),
        )
    ),
    st.none() | _TEXT,
)
def test_plain_lines_print_what_rich_prints_or_are_left_to_rich(
    shape: tuple[list[str], list[list[str]]], title: str | None
) -> None:
    columns, rows = shape
    lines = output._plain_lines(columns, rows, title)
    if lines is not None:
        assert _printed(output.PlainTable(lines)) == _by_rich(columns, rows, title)
    else:
        texts = [*columns, title or "", *(cell for row in rows for cell in row)]
        printable = all(text.isprintable() for text in texts)
        assert not printable or not all(any(column) for column in zip(columns, *rows, strict=True))


def test_a_long_table_off_a_terminal_is_plain_text_sized_to_its_content() -> None:
    rows = [[f"task-{number:05d}", "100%", None] for number in range(300)]
    rendered = output.table(["task", "mean", "reason"], rows, title="tasks")
    assert isinstance(rendered, output.PlainTable)
    printed = _printed(rendered).splitlines()
    assert printed[:3] == ["tasks", "task        mean  reason", "task-00000  100%  —     "]
    assert len(printed) == 302
