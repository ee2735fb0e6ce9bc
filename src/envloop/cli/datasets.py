"""`el dataset push|list|show`."""

from pathlib import Path
from typing import Annotated

import typer

from envloop.cli.backend import operations
from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, note, out, table, warn, when
from envloop.core.words import plural

app = typer.Typer(help="Frozen, versioned sets of tasks.", no_args_is_help=True)


@app.command()
def push(
    path: Annotated[Path, typer.Argument(help="A task directory, a folder of them, or a JSONL file.")],
    name: Annotated[str, typer.Option("--name", help="Dataset name.")],
    runner: Annotated[str | None, typer.Option("--runner", help="Runner to pin (default by format).")] = None,
    scorer: Annotated[
        str | None, typer.Option("--scorer", help="JSONL scorer: exact, includes, regex, numeric.")
    ] = None,
    json_: JsonOpt = False,
) -> None:
    """Freeze every task under PATH as a new revision NAME@N (identical content returns the existing one)."""
    view = operations().push_dataset(path, name, runner=runner, scorer=scorer)
    for message in view.warnings:
        warn(message)
    if json_:
        emit_json(view)
        return
    verb = "pushed" if view.created else "unchanged, existing revision"
    note(f"{verb} {view.ref}: {plural(view.member_count, 'task')}, runner {view.runner}, {view.digest[:19]}")
    out.print(view.ref)


@app.command("list")
def list_(json_: JsonOpt = False) -> None:
    """All dataset revisions."""
    views = operations().list_datasets()
    if json_:
        emit_json(views)
        return
    out.print(
        table(
            ["ref", "tasks", "runner", "kind", "digest", "created"],
            [[v.ref, v.member_count, v.runner, v.kind, v.digest[:19], when(v.created_at)] for v in views],
        )
    )


@app.command()
def show(ref: Annotated[str, typer.Argument(help="NAME@N or NAME@latest.")], json_: JsonOpt = False) -> None:
    """A revision's members with their digests and its pinned runner."""
    view = operations().get_dataset(ref)
    if json_:
        emit_json(view)
        return
    out.print(
        f"{view.ref}  runner {view.runner}  kind {view.kind}"
        + (f"  scorer {view.scorer}" if view.scorer else "")
    )
    out.print(f"digest {view.digest}")
    out.print(
        table(["#", "task", "digest"], [[m.position + 1, m.name, m.digest] for m in view.members or []])
    )
    if view.warnings:
        out.print("features some environment does not honour:")
        for message in view.warnings:
            out.print(f"  {message}", markup=False, highlight=False)
