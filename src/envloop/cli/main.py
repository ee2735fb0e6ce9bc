"""Entry point of `el`. Every failure a user can fix ends as one line on stderr and exit code 2."""

import sys

import typer
from typer.exceptions import TyperException

from envloop.cli import builds, compare, datasets, jobs, keys, leaderboard, model, profiles, secrets, trials
from envloop.cli.serve import serve
from envloop.cli.worker import runner_app, worker
from envloop.services.errors import UserError

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


def _fail(message: str) -> None:
    sys.stderr.write(f"el: error: {message}\n")
    sys.exit(2)


def run() -> None:
    command = typer.main.get_command(app)
    try:
        code = command.main(prog_name="el", standalone_mode=False)
    except TyperException as exc:
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        format_message = getattr(exc, "format_message", None)
        _fail((format_message() if format_message else str(exc)) + hint)
    except typer.Abort:
        sys.stderr.write("el: aborted\n")
        sys.exit(130)
    except UserError as exc:
        _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    sys.exit(code if isinstance(code, int) else 0)
