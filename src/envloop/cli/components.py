"""`el runner list|show`, `el agent list` and `el plugin list`: what can run, where each part came
from, and the params each reads (from its params model: `--json` prints the JSON schemas)."""

from typing import Annotated, Any

import typer

from envloop.cli.backend import operations, remote
from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, out, table, warn
from envloop.core.params import expectation
from envloop.errors import UserError
from envloop.wire.runners import RunnerInfo

runner_app = typer.Typer(help="Runners: the versioned harnesses that execute tasks.", no_args_is_help=True)
agent_app = typer.Typer(help="Agents the shell runner can run (AGENT_NAME).", no_args_is_help=True)
plugin_app = typer.Typer(help="Plugins installed with this envloop.", no_args_is_help=True)


def _report_broken_plugins() -> None:
    """Plugins of this machine that could not be used, as warnings: listing still works. (Against a
    server the listing is the server's, and so are its plugins' problems: not reported here.)"""
    if remote() is not None:
        return
    from envloop.services.components import installed_components  # noqa: PLC0415 - loads every component

    for problem in installed_components().problems:
        warn(problem)


@runner_app.command("list")
def list_runners(json_: JsonOpt = False) -> None:
    """Runners this envloop can run, and where each came from."""
    infos = operations().list_runners()
    if json_:
        emit_json(infos)
        return
    _report_broken_plugins()
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


@runner_app.command("show")
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


@agent_app.command("list")
def list_agents(json_: JsonOpt = False) -> None:
    """Agents a profile's AGENT_NAME may name, per runner, and where each came from."""
    infos = [info for info in operations().list_runners() if info.agents]
    if json_:
        emit_json([{"runner": i.ref, "agents": [a.model_dump(mode="json") for a in i.agents]} for i in infos])
        return
    _report_broken_plugins()
    rows = [[a.name, i.ref, a.origin.label(), a.description] for i in infos for a in i.agents]
    out.print(table(["agent", "runner", "from", "description"], rows))


@plugin_app.command("list")
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
