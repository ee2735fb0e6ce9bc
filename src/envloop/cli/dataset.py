"""`el dataset push|pull|list|show`."""

import json
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from envloop.cli.backend import operations
from envloop.cli.dataset_warnings import grouped_warnings
from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, note, out, table, warn, when
from envloop.core.words import plural
from envloop.errors import NotFoundError, UserError

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
    for message in grouped_warnings(view.warnings):
        warn(message)
    if json_:
        emit_json(view)
        return
    verb = "pushed" if view.created else "unchanged, existing revision"
    note(f"{verb} {view.ref}: {plural(view.member_count, 'task')}, runner {view.runner}, {view.digest[:19]}")
    out.print(view.ref)


@app.command()
def convert(
    source: Annotated[Path, typer.Argument(help="A Terminal-Bench 1 task directory, or a folder of them.")],
    dest: Annotated[Path, typer.Argument(help="Where to write the Harbor-format tasks (must not exist).")],
) -> None:
    """Write Terminal-Bench 1 tasks as their Harbor-format equivalent (what `el dataset push` runs
    them as); Harbor tasks beside them are copied as they are."""
    from envloop.tasks.discover import task_name  # noqa: PLC0415
    from envloop.tasks.model import TaskFormatError  # noqa: PLC0415
    from envloop.tasks.tb1 import convert_tree, holds_tb1_tasks  # noqa: PLC0415

    if not source.is_dir():
        raise UserError(f"{source}: not a directory")
    if dest.exists() or dest.is_symlink():
        raise UserError(f"{dest}: already exists")
    if not holds_tb1_tasks(source):
        raise UserError(f"{source}: no Terminal-Bench 1 task (a folder with task.yaml and no task.toml)")
    if not dest.parent.is_dir():
        raise UserError(f"{dest.parent}: no such directory")
    with tempfile.TemporaryDirectory(prefix=".el-convert-", dir=dest.parent) as scratch:
        written = Path(scratch) / "tasks"
        try:
            notes = convert_tree(source, written)
        except TaskFormatError as exc:
            raise UserError(str(exc).replace(f"{written}/", f"{dest}/")) from None
        written.rename(dest)
    # Named as a push of `source` names them.
    named = [
        (source.resolve().name if task == written else task_name(written, task), text) for task, text in notes
    ]
    for message in grouped_warnings([f"task {name}: {text}" for name, text in named]):
        warn(message)
    note(f"wrote {dest}")


RegistryOpt = Annotated[
    str | None,
    typer.Option(
        "--registry",
        metavar="URL|FILE",
        help="A Harbor-style registry: a JSON list of datasets (default: Harbor's public registry).",
    ),
]


@app.command()
def pull(
    ref: Annotated[
        str, typer.Argument(help="NAME@VERSION as the registry lists it (NAME alone: its one version).")
    ],
    registry: RegistryOpt = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Dataset name here (default: the registry's).")
    ] = None,
    runner: Annotated[str | None, typer.Option("--runner", help="Runner to pin (default by format).")] = None,
    json_: JsonOpt = False,
) -> None:
    """Fetch a registered dataset's tasks from their git repositories at the named commits and push
    them as NAME@N; `el dataset show` then names each task's repository, commit and path."""
    from envloop.tasks.git_sources import fetch_dataset  # noqa: PLC0415 - pulls alone need git
    from envloop.tasks.registry import DEFAULT_REGISTRY, RegistryError, find_dataset, read_registry  # noqa: PLC0415

    source = registry or DEFAULT_REGISTRY
    try:
        datasets = read_registry(source)
        shown_source = source if source.startswith(("http://", "https://")) else Path(source).name
        dataset = find_dataset(datasets, ref, shown_source)
        with tempfile.TemporaryDirectory(prefix="el-pull-") as scratch:
            tasks, git = Path(scratch) / "tasks", Path(scratch) / "git"
            tasks.mkdir()
            git.mkdir()
            origins = fetch_dataset(dataset, shown_source, tasks, git)
            document = json.dumps({task: origin.model_dump(mode="json") for task, origin in origins.items()})
            view = operations().push_dataset(tasks, name or dataset.name, runner=runner, origins=document)
    except RegistryError as exc:
        raise UserError(str(exc)) from None
    for message in grouped_warnings(view.warnings):
        warn(message)
    if json_:
        emit_json(view)
        return
    verb = "pulled" if view.created else "unchanged, existing revision"
    note(f"{verb} {dataset.ref} as {view.ref}: {plural(view.member_count, 'task')}, {view.digest[:19]}")
    out.print(view.ref)


@app.command("list")
def list_(
    registry: Annotated[
        bool, typer.Option("--registry", help="What a registry offers, instead of this store's revisions.")
    ] = False,
    source: Annotated[
        str | None,
        typer.Option(
            "--from", metavar="URL|FILE", help="The registry --registry reads (default: Harbor's public one)."
        ),
    ] = None,
    json_: JsonOpt = False,
) -> None:
    """All dataset revisions (or, with --registry, the datasets a registry lists)."""
    if registry:
        _list_registry(source, json_)
        return
    if source is not None:
        raise UserError("--from names the registry that --registry lists")
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
    members = view.members or []
    if any(m.origin for m in members):
        first = next(m.origin for m in members if m.origin)
        out.print(
            f"pulled from {first.dataset}@{first.version} in {first.registry}", markup=False, highlight=False
        )
        rows = [[m.position + 1, m.name, m.digest, m.origin.describe() if m.origin else ""] for m in members]
        out.print(table(["#", "task", "digest", "source"], rows))
    else:
        out.print(table(["#", "task", "digest"], [[m.position + 1, m.name, m.digest] for m in members]))
    if view.warnings:
        out.print("features some environment does not honour:")
        for message in grouped_warnings(view.warnings):
            out.print(f"  {message}", markup=False, highlight=False)
    _show_latest_check(view.ref)


def _show_latest_check(ref: str) -> None:
    """The newest health check of the revision beside it, or that it was never checked."""
    from envloop.cli.check import print_health  # noqa: PLC0415

    try:
        health = operations().latest_dataset_check(ref)
    except NotFoundError:
        out.print(f"health check: never checked (el dataset check {ref})", markup=False, highlight=False)
        return
    out.print("health check (the latest):")
    print_health(health)


def _list_registry(source: str | None, json_: bool) -> None:
    from envloop.tasks.registry import DEFAULT_REGISTRY, RegistryError, read_registry  # noqa: PLC0415

    try:
        datasets = read_registry(source or DEFAULT_REGISTRY)
    except RegistryError as exc:
        raise UserError(str(exc)) from None
    if json_:
        emit_json(
            [
                {
                    "ref": d.ref,
                    "name": d.name,
                    "version": d.version,
                    "tasks": len(d.tasks),
                    "description": d.description,
                }
                for d in datasets
            ]
        )
        return
    out.print(
        table(
            ["dataset", "tasks", "description"],
            [
                [d.ref, len(d.tasks), d.description.splitlines()[0][:80] if d.description else ""]
                for d in datasets
            ],
        )
    )
