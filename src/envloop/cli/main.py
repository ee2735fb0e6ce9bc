"""Entry point of `el`. Every failure ends as one line on stderr and an exit code of `cli.exits`.

Only the command a call names is imported: `el job result` loads `cli.job` (and, when it runs, the
store), never the web server, the sandbox or the model SDKs; `el --help` loads none of them. The
other top-level names are mounted as stand-ins that carry only their one-line help, which is what
`el --help` and the "did you mean" of a mistyped name need. Within a group, a command another
module adds (`el job compare`) is mounted only when no other command of the group is named, so
`el job get` does not import `el job compare`.
"""

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

import typer
from typer.exceptions import TyperException

from envloop import __version__
from envloop.cli import exits
from envloop.cli.pid_one import split_off_init
from envloop.errors import ServerError, UserError

HELP = "envloop: evaluate AI models and agents in sandboxes, with honest metrics."


@dataclass(frozen=True)
class Entry:
    """A top-level name of `el`: a command (a function) or a group (a Typer app) of `module`."""

    name: str
    module: str
    attribute: str
    summary: str
    """The first paragraph of its help, as `el --help` lists it (a test checks it is the real one)."""
    group: bool = False
    extra: tuple[tuple[str, str, str], ...] = ()
    """Commands of other modules mounted in the group: (name, module, function)."""


def _load(module: str, attribute: str) -> object:
    return getattr(importlib.import_module(f"envloop.cli.{module}"), attribute)


# Commands first, then groups: the order Typer lists them in.
ENTRIES = (
    Entry(
        "plan",
        "plan",
        "plan",
        "Tasks and attempts a comparison needs to detect EFFECT, from a baseline job's variance.",
    ),
    Entry(
        "worker",
        "worker",
        "worker",
        "Run a worker in the foreground on the store: claim trials from the queue and run them.",
    ),
    Entry(
        "serve",
        "serve",
        "serve",
        "Serve the HTTP API (under /v1) and the console, with local workers running the queue.",
    ),
    Entry(
        "dataset",
        "dataset",
        "app",
        "Frozen, versioned sets of tasks.",
        True,
        (("build", "build", "build"), ("check", "check", "check")),
    ),
    Entry("profile", "profile", "app", "Versioned, immutable model/agent parameters.", True),
    Entry("runner", "runner", "app", "Runners: the versioned harnesses that execute tasks.", True),
    Entry("agent", "agent", "app", "Agents the shell runner can run (AGENT_NAME).", True),
    Entry("plugin", "plugin", "app", "Plugins installed with this envloop.", True),
    Entry(
        "job",
        "job",
        "app",
        "Evaluation jobs: a dataset revision x profiles x attempts.",
        True,
        (
            ("result", "result", "result"),
            ("compare", "compare", "compare"),
            ("samples", "samples", "samples"),
        ),
    ),
    Entry("trial", "trial", "app", "Single attempts: status, reward, logs, artifacts.", True),
    Entry(
        "leaderboard",
        "leaderboard",
        "app",
        "Finished runs on the same frozen dataset revision, ranked by score with coverage.",
        True,
    ),
    Entry("key", "key", "app", "API keys of a project (for the HTTP API and ENVLOOP_API_KEY).", True),
    Entry("secret", "secret", "app", "The key that encrypts profile secrets at rest.", True),
    Entry("model", "model", "app", "Model endpoints on this machine.", True),
)


def _stand_in() -> None:
    """Never run: a stand-in is replaced by the real command before any command runs."""


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"el {__version__}\n")
        raise typer.Exit()


def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Options of `el` itself; its help text is HELP."""


def build_app(wanted: str | None, command: str | None = None) -> typer.Typer:
    """The `el` app with the entry named `wanted` (every entry when `wanted` is "*") imported for
    real, and the others as stand-ins. `command` is the command of that group a call names: the
    commands other modules add to the group are left out when it names another one."""
    app = typer.Typer(
        help=HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    app.callback()(_options)
    for entry in ENTRIES:
        real = wanted in (entry.name, "*")
        if entry.group:
            group = _load(entry.module, entry.attribute) if real else typer.Typer(help=entry.summary)
            assert isinstance(group, typer.Typer)
            if real:
                known = _command_names(group) | {name for name, _, _ in entry.extra}
                for name, module, attribute in entry.extra:
                    if command not in known or command == name:  # a mistyped name gets every suggestion
                        group.command(name)(_command(module, attribute))
            app.add_typer(group, name=entry.name)
        else:
            function = _command(entry.module, entry.attribute) if real else _stand_in
            app.command(entry.name, help=None if real else entry.summary)(function)
    return app


def _command_names(group: typer.Typer) -> set[str]:
    """The names of the commands a group's own module registers, as typer names them."""
    return {
        info.name or typer.main.get_command_name(getattr(info.callback, "__name__", ""))
        for info in group.registered_commands
    }


def _command(module: str, function: str) -> Callable[..., object]:
    loaded = _load(module, function)
    assert callable(loaded)
    return loaded


def _wanted(args: list[str]) -> tuple[str | None, str | None]:
    """The top-level name the arguments call, if any, and the word after it: the command of a
    group (neither `el` nor a group has options of its own but --help)."""
    words = [arg for arg in args if not arg.startswith("-")][:2]
    if not words or not any(entry.name == words[0] for entry in ENTRIES):
        return None, None
    return words[0], words[1] if len(words) > 1 else None


def _fail(message: str, code: int = exits.BAD_INPUT) -> None:
    sys.stderr.write(f"el: error: {_one_line(message)}\n")
    sys.exit(code)


def _one_line(message: str) -> str:
    lines = message.strip().splitlines()
    return "".join(ch if ch.isprintable() else " " for ch in lines[0]) if lines else "failed"


def _check_settings() -> None:
    """Every ENVLOOP_* value, checked before a command runs: a bad one stops it in one line naming
    the variable (exit code 2) before anything is created. `el --help` skips this, loading no pydantic."""
    from envloop.settings import settings  # noqa: PLC0415

    settings()


def _debugging() -> bool:
    from envloop.settings import SettingsError, settings  # noqa: PLC0415

    try:
        return settings().debug
    except SettingsError:
        return False


def run() -> None:
    split_off_init()
    try:
        wanted, named = _wanted(sys.argv[1:])
        if wanted is not None:
            _check_settings()
        command = typer.main.get_command(build_app(wanted, named))
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
        if _debugging():
            raise
        _fail(f"internal error: {type(exc).__name__}: {exc} (ENVLOOP_DEBUG=1 shows where)", exits.INTERNAL)
    sys.exit(code if isinstance(code, int) else exits.OK)
