"""`el model serve`: the bundled local model on loopback, for profiles to evaluate."""

import contextlib
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from envloop.cli.output import emit_json, note
from envloop.models.local import DEFAULT_PORT, LocalModelConfig, LocalModelError, LocalModelServer
from envloop.services.context import envloop_home
from envloop.services.errors import UserError

app = typer.Typer(help="Model endpoints on this machine.", no_args_is_help=True)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM unwinds like Ctrl-C, so the server is stopped by the same `finally`."""
    raise KeyboardInterrupt


@app.command()
def serve(
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: any free port).")
    ] = DEFAULT_PORT,
    model: Annotated[
        Path | None, typer.Option("--model", help="A GGUF file (default: the bundled SmolLM2-135M-Instruct).")
    ] = None,
    threads: Annotated[
        int | None, typer.Option("--threads", min=1, help="CPU threads (default: cores).")
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", help="Require this key (then make MODEL_API_KEY a secret param)."),
    ] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the endpoint as JSON on stdout.")] = False,
) -> None:
    """Serve the local model (OpenAI-compatible) until interrupted; the first line of stdout is the
    base URL to put in a profile's MODEL_BASE_URL."""
    settings: dict[str, Any] = {"port": port, "model_path": model, "api_key": api_key}
    if threads is not None:
        settings["threads"] = threads
    log_path = envloop_home() / "logs" / "local-model.log"
    server = LocalModelServer(LocalModelConfig(**settings), log_path=log_path)
    note(f"starting the local model on 127.0.0.1 (log: {log_path})")
    try:
        server.start()
    except LocalModelError as exc:
        raise UserError(str(exc)) from None
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        if json_:
            emit_json({"base_url": server.base_url, "model": server.config.alias, "pid": server.pid})
        else:
            sys.stdout.write(server.base_url + "\n")
            sys.stdout.flush()
        note(
            "profile params: MODEL_PROTOCOL=openai, "
            f"MODEL_BASE_URL={server.base_url}, MODEL_NAME={server.config.alias}; Ctrl-C stops it"
        )
        with contextlib.suppress(KeyboardInterrupt):
            code = server.wait()
            if code not in (0, -signal.SIGTERM):
                raise UserError(f"the model server exited with code {code} (log: {log_path})")
    finally:
        server.stop()
