"""`el agent list`: the agents a profile's AGENT_NAME may name, per runner, and where each came
from (`el runner show` lists each agent's params)."""

import typer

from envloop.cli.backend import operations
from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, out, table
from envloop.cli.plugin import report_broken_plugins

app = typer.Typer(help="Agents the shell runner can run (AGENT_NAME).", no_args_is_help=True)


@app.command("list")
def list_agents(json_: JsonOpt = False) -> None:
    """Agents a profile's AGENT_NAME may name, per runner, and where each came from."""
    infos = [info for info in operations().list_runners() if info.agents]
    if json_:
        emit_json([{"runner": i.ref, "agents": [a.model_dump(mode="json") for a in i.agents]} for i in infos])
        return
    report_broken_plugins()
    rows = [[a.name, i.ref, a.origin.label(), a.description] for i in infos for a in i.agents]
    out.print(table(["agent", "runner", "from", "description"], rows))
