"""Entry point of `el`. Every failure ends as one line on stderr and an exit code of `cli.exits`."""

import os
import sys

import typer
from typer.exceptions import TyperException

from envloop.cli import (
    builds,
    compare,
    datasets,
    exits,
    jobs,
    keys,
    leaderboard,
    model,
    profiles,
    secrets,
    trials,
)
from envloop.cli.components import agent_app, plugin_app, runner_app
from envloop.cli.serve import serve
from envloop.cli.worker import worker
from envloop.services.errors import ServerError, UserError

app = typer.Typer(
    help="envloop: evaluate AI models and agents in sandboxes, with honest metrics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.add_typer(datasets.app, name="dataset")
datasets.app.command("build")(builds.build)
app.add_typer(profiles.app, name="profile")
app.add_typer(runner_app, name="runner")
app.add_typer(agent_app, name="agent")
app.add_typer(plugin_app, name="plugin")
app.add_typer(jobs.app, name="job")
app.add_typer(trials.app, name="trial")
app.add_typer(leaderboard.app, name="leaderboard")
jobs.app.command("compare")(compare.compare)
app.command("plan")(compare.plan)
app.command("worker")(worker)
app.add_typer(keys.app, name="key")
app.add_typer(secrets.app, name="secret")
app.command("serve")(serve)
app.add_typer(model.app, name="model")


def _fail(message: str, code: int = exits.BAD_INPUT) -> None:
    sys.stderr.write(f"el: error: {_one_line(message)}\n")
    sys.exit(code)


def _one_line(message: str) -> str:
    lines = message.strip().splitlines()
    return "".join(ch if ch.isprintable() else " " for ch in lines[0]) if lines else "failed"


def run() -> None:
    command = typer.main.get_command(app)
    try:
        code = command.main(prog_name="el", standalone_mode=False)
    except TyperException as exc:
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        format_message = getattr(exc, "format_message", None)
        _fail((format_message() if format_message else str(exc)) + hint)
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write("el: aborted\n")
        sys.exit(exits.INTERRUPTED)
    except UserError as exc:
        _fail(str(exc) or type(exc).__name__)
    except ServerError as exc:
        _fail(str(exc) or type(exc).__name__, exits.SERVER)
    except Exception as exc:
        if os.environ.get("ENVLOOP_DEBUG"):
            raise
        _fail(f"internal error: {type(exc).__name__}: {exc} (ENVLOOP_DEBUG=1 shows where)", exits.INTERNAL)
    sys.exit(code if isinstance(code, int) else exits.OK)
