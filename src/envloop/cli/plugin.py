"""`el plugin list`: every component installed on this machine and where it came from, and the
plugins that could not be used (`el runner list` and `el agent list` warn of those too)."""

import typer

from envloop.cli.backend import remote
from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, out, table, warn

app = typer.Typer(help="Plugins installed with this envloop.", no_args_is_help=True)


def report_broken_plugins() -> None:
    """Plugins of this machine that could not be used, as warnings: listing still works. (Against a
    server the listing is the server's, and so are its plugins' problems: not reported here.)"""
    if remote() is not None:
        return
    from envloop.services.components import installed_components  # noqa: PLC0415 - loads every component

    for problem in installed_components().problems:
        warn(problem)


@app.command("list")
def list_plugins(json_: JsonOpt = False) -> None:
    """Every agent, runner, JSONL scorer and environment installed on this machine (not a server's:
    ENVLOOP_URL is not consulted), and the plugins that could not be used."""
    from envloop.services.components import installed_components  # noqa: PLC0415 - loads every component

    report = installed_components()
    if json_:
        emit_json(report)
        return
    for problem in report.problems:
        warn(problem)
    rows = [[c.kind, c.name, c.origin.label()] for c in report.components]
    out.print(table(["kind", "name", "from"], rows))
