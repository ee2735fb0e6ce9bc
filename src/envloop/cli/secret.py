"""`el secret rotate-key`: re-encrypt every stored profile secret with a new key."""

import typer

from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, note, out
from envloop.cli.state import context

app = typer.Typer(help="The key that encrypts profile secrets at rest.", no_args_is_help=True)


@app.command("rotate-key")
def rotate_key(json_: JsonOpt = False) -> None:
    """Encrypt every stored secret with a new key, then forget the old key.

    With the key file (ENVLOOP_HOME/secret.key or ENVLOOP_SECRET_KEY_FILE) a new key is made; with
    ENVLOOP_SECRET_KEY, put the new key first in it before running this. Runs on the store itself
    (not through a server); workers elsewhere need the new key afterwards."""
    from envloop.store.secrets import rotate_secret_key  # noqa: PLC0415 - only this command needs it

    ctx = context()
    rotation = rotate_secret_key(ctx.store, ctx.home)
    if json_:
        emit_json(rotation)
        return
    count = f"{rotation.secrets} secret" + ("" if rotation.secrets == 1 else "s")
    out.print(f"re-encrypted {count} with the newest key ({rotation.key_source})")
    if rotation.note:
        note(rotation.note)
