"""`python -m envloop.testing [--port N] [--answers FILE.jsonl] [--api-key KEY]`: serve in the foreground.

With `--answers`, each prompt of a JSONL dataset is answered with its row's answer (a model that
knows exactly that set; other prompts get an empty answer); without it, prompts are echoed back.
The first line on stdout is the root URL.
"""

import argparse
import contextlib
import signal
import sys
import threading
from pathlib import Path

from envloop.tasks.jsonl import load_jsonl
from envloop.testing.script import Received, Reply, answers
from envloop.testing.server import ScriptedServer


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m envloop.testing", description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--answers", type=Path, help="answer the prompts of this JSONL dataset")
    parser.add_argument("--api-key", help="require this key")
    args = parser.parse_args()
    if args.answers is not None:
        table = {row.prompt: row.answer for row in load_jsonl(args.answers)}
        responder = answers(table, unknown="")
    else:
        responder = _echo
    server = ScriptedServer(default=responder, api_key=args.api_key, port=args.port).start()
    sys.stdout.write(server.root_url + "\n")
    sys.stdout.flush()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    server.stop()


def _echo(received: Received) -> Reply:
    return Reply(text=received.prompt)


if __name__ == "__main__":
    main()
