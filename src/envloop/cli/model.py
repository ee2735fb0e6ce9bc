"""`el model serve`: local models on loopback under named aliases, for profiles to evaluate."""

import signal
import socket
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from envloop.cli.output import emit_json, note, warn
from envloop.cli.state import context
from envloop.errors import UserError
from envloop.models.local import DEFAULT_PORT, LocalModelError
from envloop.models.serving.aliases import DEFAULT_NAME, check_endpoint_name, parse_models

if TYPE_CHECKING:
    from fastapi import FastAPI

app = typer.Typer(help="Model endpoints on this machine.", no_args_is_help=True)


def _stop(signum: int, frame: object) -> None:
    """SIGTERM ends the command with exit code 0, also when uvicorn passes it on after its own
    graceful stop."""
    raise SystemExit(0)


def _listen(port: int) -> socket.socket:
    """The server's socket, bound as servers bind (SO_REUSEADDR): a port whose last server has just
    stopped, while its clients still hold their connections, is free again; one another server
    listens on is not."""
    try:
        return socket.create_server(("127.0.0.1", port), backlog=64)
    except OSError:
        raise UserError(f"port {port} on 127.0.0.1 is in use; choose another with --port") from None


@app.command()
def serve(
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            metavar="ALIAS[=GGUF_FILE]",
            help="ALIAS (the bundled SmolLM2-135M-Instruct) or ALIAS=GGUF_FILE; repeat for several. "
            "Served as NAME/ALIAS. Default: one alias, base.",
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="ALIAS.SETTING=VALUE",
            help="ALIAS.SETTING=VALUE, repeatable: system_prompt, temperature, top_p, seed (defaults for "
            "requests that give none), max_tokens (a cap), context_tokens.",
        ),
    ] = None,
    name: Annotated[
        str, typer.Option("--name", help="The endpoint's name, before each alias.")
    ] = DEFAULT_NAME,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: any free port).")
    ] = DEFAULT_PORT,
    threads: Annotated[int, typer.Option("--threads", min=1, help="CPU threads per request.")] = 2,
    project: Annotated[
        str | None, typer.Option("--project", help="Whose keys are accepted (default: the default project).")
    ] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the endpoint as JSON on stdout.")] = False,
) -> None:
    """Serve local models over the OpenAI Chat Completions and Responses and the Anthropic Messages
    protocols until interrupted. Callers send a key of the project (el key create). The first line
    of stdout is the OpenAI base URL (MODEL_BASE_URL with MODEL_PROTOCOL=openai); the Anthropic one
    is its root."""
    # The store, the engine and the web stack load only when a model is served.
    from envloop.models.serving.app import create_model_app  # noqa: PLC0415
    from envloop.models.serving.engine import Engine  # noqa: PLC0415
    from envloop.services import keys  # noqa: PLC0415

    signal.signal(signal.SIGTERM, _stop)
    endpoint = check_endpoint_name(name)
    aliases = parse_models(model or [], set_ or [])
    ctx = context()
    if project is not None:
        ctx = keys.project_context(ctx, keys.find_project(ctx.store, project))
    project_id = ctx.project_id
    if not any(k.revoked_at is None for k in keys.list_keys(ctx)):
        warn("this project has no active key yet: create one with el key create")

    def authenticate(key: str) -> bool:
        return keys.authenticate_key(ctx.store, key) == project_id

    engine = Engine(endpoint, aliases, threads)
    sock = _listen(port)
    try:
        note(f"loading {len(aliases)} alias(es) of {endpoint} on 127.0.0.1")
        try:
            engine.load()
        except LocalModelError as exc:
            raise UserError(str(exc)) from None
        bound = int(sock.getsockname()[1])
        root = f"http://127.0.0.1:{bound}"
        if json_:
            emit_json(
                {"openai_base_url": f"{root}/v1", "anthropic_base_url": root, "models": engine.model_ids()}
            )
        else:
            sys.stdout.write(f"{root}/v1\n")
            sys.stdout.flush()
        note(
            f"models {', '.join(engine.model_ids())}; MODEL_BASE_URL={root}/v1 (MODEL_PROTOCOL=openai) or "
            f"{root} (anthropic); MODEL_API_KEY: a key of the project; Ctrl-C stops it"
        )
        _run(create_model_app(engine, authenticate), sock)
    finally:
        sock.close()


def _run(asgi: "FastAPI", sock: socket.socket) -> None:
    """uvicorn on the socket bound above; SIGINT and SIGTERM end it cleanly (exit code 0)."""
    import uvicorn  # noqa: PLC0415 - the server loads only when a model is served

    uvicorn.Server(uvicorn.Config(asgi, log_level="warning", access_log=False)).run(sockets=[sock])
