"""`el key create|list|revoke`: per-project API keys, managed on the server's own store."""

from typing import TYPE_CHECKING, Annotated

import typer

from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, note, out, table, when
from envloop.cli.state import context

if TYPE_CHECKING:
    from envloop.store.context import Context

# Keys live in the store: each command imports the key service when it runs, never for --help.
# ruff: noqa: PLC0415

app = typer.Typer(help="API keys of a project (for the HTTP API and ENVLOOP_API_KEY).", no_args_is_help=True)
ProjectOpt = Annotated[str | None, typer.Option("--project", help="Project name (default: default).")]


def _project(name: str | None) -> "Context":
    from envloop.services import keys

    ctx = context()
    return ctx if name is None else keys.project_context(ctx, keys.find_project(ctx.store, name))


@app.command()
def create(
    project: Annotated[
        str | None, typer.Option("--project", help="Project name; created with its first key.")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="A label to recognise the key by.")] = None,
    json_: JsonOpt = False,
) -> None:
    """Create a key; this is the only time its secret is shown."""
    from envloop.services import keys

    created = keys.create_key(context(), name, project=project)
    if json_:
        emit_json(created)
        return
    note(f"key {created.id} for project {created.project}; store it now, it is not shown again")
    out.print(created.key)


@app.command("list")
def list_(project: ProjectOpt = None, json_: JsonOpt = False) -> None:
    """A project's keys, revoked ones included (never their secrets)."""
    from envloop.services import keys

    views = keys.list_keys(_project(project))
    if json_:
        emit_json(views)
        return
    out.print(
        table(
            ["id", "name", "prefix", "created", "last used", "revoked"],
            [
                [v.id, v.name, v.prefix + "…", when(v.created_at), when(v.last_used_at), when(v.revoked_at)]
                for v in views
            ],
        )
    )


@app.command()
def revoke(key_id: str, project: ProjectOpt = None, json_: JsonOpt = False) -> None:
    """The key stops authenticating at once."""
    from envloop.services import keys

    view = keys.revoke_key(_project(project), key_id)
    if json_:
        emit_json(view)
        return
    out.print(f"{view.id} revoked")
