"""A model gateway running on an event loop of its own thread, as a worker runs it on its loop,
driven from synchronous test code (the official SDKs' synchronous clients play the agents)."""

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

from envloop.gateway import GatewaySession, GatewaySettings, ModelGateway, Upstream

T = TypeVar("T")


class GatewayThread:
    def __init__(self, settings: GatewaySettings) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="gateway-loop", daemon=True)
        self.thread.start()
        self.gateway = ModelGateway(settings)
        self.wait(self.gateway.start())

    def wait(self, coroutine: Any, timeout: float = 60) -> Any:
        """Run a coroutine on the gateway's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def call(self, function: Callable[[], T]) -> T:
        """Run a plain function on the gateway's loop (sessions are not thread-safe)."""

        async def run() -> T:
            return function()

        result: T = self.wait(run())
        return result

    def open(self, upstream: Upstream, trial_id: str = "trl_test") -> GatewaySession:
        return self.call(lambda: self.gateway.open_session(trial_id, upstream))

    def close(self) -> None:
        self.wait(self.gateway.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@contextmanager
def running_gateway(**settings: Any) -> Iterator[GatewayThread]:
    gateway = GatewayThread(GatewaySettings(**settings))
    try:
        yield gateway
    finally:
        gateway.close()


Answer = Callable[[BaseHTTPRequestHandler, bytes], None]
"""Writes the whole answer to one request (given its body) on the handler, raw."""


class RawUpstream:
    """An upstream whose every answer is written by the test byte by byte: a stream that breaks
    off, a redirect, an HTML error page, headers that carry the key... Requests are kept."""

    def __init__(self, answer: Answer) -> None:
        owner = self
        self.requests: list[tuple[str, dict[str, str], bytes]] = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                self.close_connection = True
                answer(self, body)

            do_GET = do_POST

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.thread = threading.Thread(target=self.http.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}"

    def __enter__(self) -> "RawUpstream":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.shutdown()
        self.http.server_close()


def sse_head(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Connection", "close")
    handler.end_headers()
