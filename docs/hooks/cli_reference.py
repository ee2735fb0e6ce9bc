"""The CLI reference page, written from `el`'s own commands at build time.

Walking the real Typer app (every group imported, as `el GROUP --help` would) means the page can
never list an option the CLI lacks or miss one it has: the help texts in the code are the only copy.
"""

from markdown_text import cell
from typer._click import Command, Context
from typer.core import TyperGroup
from typer.main import get_command

from envloop.cli.main import HELP, build_app


def cli_markdown() -> str:
    """The whole `el` reference: an index of every command, then one section per command."""
    root = get_command(build_app("*"))
    context = Context(root, info_name="el")
    commands = list(_walk(root, context))
    lines = [
        "# CLI reference",
        "",
        "<!-- Generated from the `el` command itself when the site is built; edit the help texts in "
        "src/envloop/cli, not this page. -->",
        "",
        HELP,
        "",
        "Every command takes `--help`; most take `--json`, after which standard output carries only "
        "the JSON document. Failures print one line, `el: error: …`, and exit with a code of "
        "[Exit codes](exit-codes.md).",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    lines += [f"| [`{ctx.command_path}`](#{_anchor(ctx)}) | {cell(_summary(cmd))} |" for cmd, ctx in commands]
    for command, ctx in commands:
        lines += ["", *_command_section(command, ctx)]
    return "\n".join(lines) + "\n"


def _walk(group: Command, context: Context) -> list[tuple[Command, Context]]:
    """Every leaf command under `group`, depth first in the order `--help` lists them."""
    found: list[tuple[Command, Context]] = []
    assert isinstance(group, TyperGroup)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        if command is None or command.hidden:
            continue
        child = Context(command, info_name=name, parent=context)
        if isinstance(command, TyperGroup):
            found += _walk(command, child)
        else:
            found.append((command, child))
    return found


def _command_section(command: Command, ctx: Context) -> list[str]:
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    lines = [f"## {ctx.command_path}", ""]
    lines += ["```text", usage, "```", ""]
    lines += _paragraphs(command.help or "")
    rows = [record for param in command.get_params(ctx) if (record := param.get_help_record(ctx))]
    rows = [(name, text) for name, text in rows if name != "--help"]
    if rows:
        lines += ["", "| argument or option | meaning |", "|---|---|"]
        lines += [f"| `{cell(name)}` | {cell(text)} |" for name, text in rows]
    return lines


def _paragraphs(text: str) -> list[str]:
    """Help text as Markdown: Click's `\\b` (no rewrap) markers dropped, paragraphs kept."""
    kept = [line for line in text.strip().splitlines() if line.strip() != "\b"]
    return [line.strip() for line in kept]


def _summary(command: Command) -> str:
    first = (command.help or "").strip().split("\n\n")[0]
    return " ".join(first.split())


def _anchor(ctx: Context) -> str:
    """The heading's id, as the table of contents makes it from `## el job submit`."""
    return ctx.command_path.replace(" ", "-")
