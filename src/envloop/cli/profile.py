"""`el profile create|list|show`."""

from pathlib import Path
from typing import Annotated

import typer

from envloop.cli.backend import operations
from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, note, out, table, when

app = typer.Typer(help="Versioned, immutable model/agent parameters.", no_args_is_help=True)


@app.command()
def create(
    name: Annotated[str, typer.Argument(help="Profile name, e.g. team/eval.")],
    version: Annotated[str, typer.Argument(help="Profile version, e.g. 1.")],
    file: Annotated[Path, typer.Option("--file", help="Profile document (JSON, envplatform.profile/v2).")],
    json_: JsonOpt = False,
) -> None:
    """Publish NAME@VERSION. The same content again is a no-op; different content is refused."""
    from envloop.wire.profiles import read_profile_file  # noqa: PLC0415

    view = operations().create_profile(name, version, read_profile_file(file))
    if json_:
        emit_json(view)
        return
    note(f"{'created' if view.created else 'unchanged'} {view.ref}")
    out.print(view.ref)


@app.command("list")
def list_(json_: JsonOpt = False) -> None:
    """All profiles (secret values shown as ***)."""
    views = operations().list_profiles()
    if json_:
        emit_json(views)
        return
    out.print(
        table(
            ["ref", "agent", "params", "secret", "created"],
            [
                [
                    v.ref,
                    v.params.get("AGENT_NAME"),
                    len(v.params),
                    ", ".join(v.secret_params),
                    when(v.created_at),
                ]
                for v in views
            ],
        )
    )


@app.command()
def show(ref: Annotated[str, typer.Argument(help="NAME@VERSION.")], json_: JsonOpt = False) -> None:
    """One profile's params (secret values shown as ***)."""
    view = operations().get_profile(ref)
    if json_:
        emit_json(view)
        return
    out.print(f"{view.ref}  {view.digest[:19]}  created {when(view.created_at)}")
    out.print(table(["param", "value"], list(view.params.items())))
