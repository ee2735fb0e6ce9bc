"""`el runner list|show`: what can run, where each runner came from, and the params each reads
(from its params model: `--json` prints the JSON schemas)."""

from typing import Annotated, Any

import typer

from envloop.cli.backend import operations
from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, out, table
from envloop.cli.plugin import report_broken_plugins
from envloop.core.params import expectation
from envloop.errors import UserError
from envloop.wire.runners import RunnerInfo

app = typer.Typer(help="Runners: the versioned harnesses that execute tasks.", no_args_is_help=True)


@app.command("list")
def list_runners(json_: JsonOpt = False) -> None:
    """Runners this envloop can run, and where each came from."""
    infos = operations().list_runners()
    if json_:
        emit_json(infos)
        return
    report_broken_plugins()
    rows = [[i.ref, i.task_kind, i.origin.label(), i.description] for i in infos]
    out.print(table(["runner", "tasks", "from", "description"], rows))


def _find(ref: str) -> RunnerInfo:
    infos = operations().list_runners()
    for info in infos:
        if info.ref == ref:
            return info
    raise UserError(f"unknown runner {ref[:80]!r} (known: {', '.join(i.ref for i in infos)})")


def _param_rows(schema: dict[str, Any]) -> list[list[object]]:
    required = set(schema.get("required", []))
    rows: list[list[object]] = []
    for name, prop in schema.get("properties", {}).items():
        default = "required" if name in required else prop.get("default")
        secret = "secret" if prop.get("secret") else ""
        rows.append([name, expectation(prop), default, secret, prop.get("description", "")])
    return rows


@app.command("show")
def show_runner(
    ref: Annotated[str, typer.Argument(help="e.g. envloop/shell@1")], json_: JsonOpt = False
) -> None:
    """A runner's params and, for the shell runner, each agent's: name, type, default, secret."""
    info = _find(ref)
    if json_:
        emit_json(info)
        return
    out.print(f"{info.ref}  ({info.task_kind} tasks; {info.origin.label()})\n{info.description}\n")
    columns = ["param", "type", "default", "secret", "description"]
    out.print(table(columns, _param_rows(info.params_schema), title=f"runner {info.ref}"))
    for agent in info.agents:
        out.print()
        rows = _param_rows(agent.params_schema)
        if agent.params_schema.get("additionalProperties", False) is not False:
            rows.append(["(any other)", "text", None, "", "every profile param reaches this agent"])
        title = f"agent {agent.name} ({agent.origin.label()}): {agent.description}"
        out.print(table(columns, rows, title=title) if rows else f"{title}\n  reads no params")
