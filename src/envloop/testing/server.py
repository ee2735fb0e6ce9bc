"""The scripted endpoint: a real HTTP server on 127.0.0.1 that speaks Chat Completions
(`POST /v1/chat/completions`), the Responses API (`POST /v1/responses`, function calls as
`function_call` items), Messages (`POST /v1/messages`; `/v1/messages/count_tokens` counts
without taking a reply) and the Gemini API (`POST /v1beta/models/MODEL:generateContent`,
`:streamGenerateContent`, `:countTokens`), answers from a script, and records every request it
received.

    with ScriptedServer([Reply(text="4"), Reply(status=429, headers={"Retry-After": "0"})]) as server:
        ...  # MODEL_BASE_URL = server.openai_url (…/v1) or server.anthropic_url (the root)
        server.received[0].prompt

Replies are taken in order; an item may also be a function of the request. When the script runs
out, `default` answers (or, without one, a 500 error saying the script is exhausted). With
`api_key`, requests must carry it (`Authorization: Bearer …`, `x-api-key` on Messages,
`x-goog-api-key` or `?key=` on Gemini's) or get a 401. Streaming requests get server-sent events;
the connection closes after the stream.
"""

import contextlib
import json
import re
import socket
import sys
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl

from envloop.testing.replies import error_body, response_body, stream_events
from envloop.testing.script import Received, Reply, ReplyProtocol, Responder, input_tokens

_GEMINI = re.compile(r"/v1(beta)?/models/.+:(generateContent|streamGenerateContent|countTokens)")
_ROUTES: dict[str, ReplyProtocol] = {
    "/v1/chat/completions": "openai",
    "/v1/responses": "openai-responses",
    "/v1/messages": "anthropic",
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: "_HTTPServer"

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, True)

    def finish(self) -> None:
        self.server.owner._track(self.connection, False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are recorded in `received`, not printed."""

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
            return
        self._json(404, error_body("openai", 404, f"no route GET {path}"))

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        protocol: ReplyProtocol | None = (
            "anthropic" if path == "/v1/messages/count_tokens" else _ROUTES.get(path)
        )
        if _GEMINI.fullmatch(path):
            protocol = "gemini"
        if protocol is None:
            self._json(404, error_body("openai", 404, f"no route POST {path}"))
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._json(400, error_body(protocol, 400, f"request body is not JSON: {exc}"))
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        key = dict(parse_qsl(self.path.partition("?")[2])).get("key")
        if protocol == "gemini" and key is not None:
            headers.setdefault("x-goog-api-key", key)
        received = Received(protocol=protocol, path=path, headers=headers, body=body)
        owner = self.server.owner
        if not owner._authorised(protocol, headers):
            self._json(401, error_body(protocol, 401, "invalid API key"))
            return
        if path == "/v1/messages/count_tokens" or path.endswith(":countTokens"):
            owner.counted.append(received)
            counted = input_tokens(received)
            self._json(200, {"totalTokens": counted} if protocol == "gemini" else {"input_tokens": counted})
            return
        reply, number = owner._next(received)
        if reply.delay_sec:
            time.sleep(reply.delay_sec)
        if reply.disconnect:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if reply.status >= 400:
            self._json(reply.status, error_body(protocol, reply.status, reply.error), reply.headers)
            return
        response_id = f"scripted-{number}"
        if received.stream:
            self._stream(protocol, received, reply, response_id)
            return
        self._json(200, response_body(protocol, received, reply, response_id), reply.headers)

    def _json(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, protocol: ReplyProtocol, received: Received, reply: Reply, response_id: str) -> None:
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        for event in stream_events(protocol, received, reply, response_id):
            self.wfile.write(event)
            self.wfile.flush()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # many clients connect at once; the default backlog of 5 drops them
    owner: "ScriptedServer"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-answer (a timeout it chose, a cancelled trial) is not news."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ScriptedServer:
    def __init__(
        self,
        script: Iterable[Reply | Responder] = (),
        *,
        default: Responder | None = None,
        api_key: str | None = None,
        port: int = 0,
    ) -> None:
        self._script = list(script)
        self._default = default
        self._api_key = api_key
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self.received: list[Received] = []
        self.counted: list[Received] = []
        """count_tokens requests, answered without taking a reply from the script."""
        self._http = _HTTPServer(("127.0.0.1", port), _Handler)
        self._http.owner = self
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._http.server_address[1])

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        """MODEL_BASE_URL for MODEL_PROTOCOL=openai (the SDK's convention: ending in /v1)."""
        return f"{self.root_url}/v1"

    @property
    def gemini_url(self) -> str:
        """The Gemini API's base URL (the root, as GOOGLE_GEMINI_BASE_URL takes it)."""
        return self.root_url

    @property
    def anthropic_url(self) -> str:
        """MODEL_BASE_URL for MODEL_PROTOCOL=anthropic (the SDK's convention: the root URL)."""
        return self.root_url

    def add(self, *items: Reply | Responder) -> None:
        """Append to the script while the server runs."""
        with self._lock:
            self._script.extend(items)

    def start(self) -> "ScriptedServer":
        self._thread = threading.Thread(
            target=self._http.serve_forever, args=(0.05,), name="scripted-endpoint", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        with self._lock:
            open_connections = list(self._connections)
        for connection in open_connections:  # idle keep-alive connections would hold their threads
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._http.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "ScriptedServer":
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _track(self, connection: socket.socket, opened: bool) -> None:
        with self._lock:
            if opened:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def _authorised(self, protocol: ReplyProtocol, headers: dict[str, str]) -> bool:
        if self._api_key is None:
            return True
        if headers.get("authorization") == f"Bearer {self._api_key}":
            return True
        if protocol == "gemini":
            return headers.get("x-goog-api-key") == self._api_key
        return protocol == "anthropic" and headers.get("x-api-key") == self._api_key

    def _next(self, received: Received) -> tuple[Reply, int]:
        with self._lock:
            self.received.append(received)
            number = len(self.received)
            item = self._script.pop(0) if self._script else self._default
        if item is None:
            return Reply(status=500, error=f"the script has no reply left for request {number}"), number
        return (item if isinstance(item, Reply) else item(received)), number
