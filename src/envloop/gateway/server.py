"""The model gateway of a worker: an HTTP server on the worker's event loop that takes each trial's
token in place of its model key, forwards the call to the trial's upstream with the real key, and
records it in the trial's session.

    gateway = ModelGateway(GatewaySettings(allow_private_upstream=False))
    await gateway.start()                                   # 127.0.0.1, any free port
    session = gateway.open_session(trial_id, Upstream(protocol="openai", base_url=..., api_key=...))
    # the agent: MODEL_BASE_URL=session.base_url, MODEL_API_KEY=session.token
    session.close(); session.steps()                        # the calls, as model steps
    listener = await gateway.add_listener(sock, trial_id=trial_id)   # another bound socket
    await gateway.remove_listener(listener)
    await gateway.stop()

Besides its own loopback listener, the gateway serves sockets bound elsewhere (inside a sandbox's
network namespace, on a trial's bridge address) added and removed while it runs; adding one costs
a listening server on the loop, no thread and no process. A listener added for one trial accepts
that trial's token only. Removing a listener closes its connections too.

Every refusal is one line of JSON in the protocol's error shape: 400 for a request target that is
not a path, 404 for any path but the protocol routes (or the other protocol's routes), 401 for a
missing, unknown or revoked token (as `Authorization: Bearer`, `x-api-key`, `x-goog-api-key` or
Gemini's `?key=`), 413 for a body over the limit. Gemini's API is translated to the upstream's Chat
Completions (gateway/gemini.py).
"""

import asyncio
import functools
import socket
from collections.abc import Mapping
from typing import Any

import aiohttp
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from envloop.gateway.forward import Forwarder, Limits, error_response
from envloop.gateway.gemini import GeminiCall, gemini_target, handle_gemini
from envloop.gateway.routes import TargetRefused, match
from envloop.gateway.session import GatewaySession, base_url
from envloop.gateway.to_agent import error_protocol
from envloop.gateway.upstream import PublicOnlyResolver, Upstream, check_upstream

_MIB = 1024 * 1024


class GatewaySettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    host: str = Field(default="127.0.0.1", description="the address of the gateway's own listener")
    port: int = Field(default=0, ge=0, le=65535, description="its port; 0: any free port")
    allow_private_upstream: bool = Field(
        default=False, description="allow upstreams on loopback, link-local and private addresses"
    )
    max_body_bytes: int = Field(
        default=32 * _MIB, ge=1024, description="the largest request body (413 beyond)"
    )
    max_event_bytes: int = Field(
        default=8 * _MIB, ge=1024, description="the largest stream event or whole answer read for the record"
    )
    max_recorded_chars: int = Field(
        default=64 * 1024, ge=256, description="the most characters kept of each recorded text"
    )
    connect_timeout_sec: float = Field(default=30.0, gt=0, description="to connect to an upstream")
    read_timeout_sec: float = Field(
        default=900.0, gt=0, description="the longest an upstream may stay silent during an answer"
    )
    keepalive_timeout_sec: float = Field(
        default=300.0, gt=0, description="idle agent connections close after"
    )


class Listener:
    """One listening socket the gateway serves; `trial_id` set: that trial's token only."""

    def __init__(self, sock: socket.socket, trial_id: str | None) -> None:
        self.trial_id = trial_id
        address = sock.getsockname()
        self.host, self.port = str(address[0]), int(address[1])
        self.server: asyncio.AbstractServer | None = None
        self.web: web.Server | None = None

    def base_url(self, protocol: str) -> str:
        """The base URL an agent reaching this listener gives its SDK."""
        return base_url(protocol, self.host, self.port)


def presented_tokens(headers: Mapping[str, str]) -> list[str]:
    """The credentials a request carries, as each SDK sends them (Google's as `x-goog-api-key`)."""
    tokens = []
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        tokens.append(value.strip())
    for name in ("x-api-key", "x-goog-api-key"):
        if headers.get(name, "").strip():
            tokens.append(headers[name].strip())
    return tokens


class ModelGateway:
    def __init__(self, settings: GatewaySettings | None = None) -> None:
        self.settings = settings or GatewaySettings()
        self._sessions: dict[str, GatewaySession] = {}
        self._listeners: list[Listener] = []
        self._forwarder: Forwarder | None = None
        self._main: Listener | None = None

    @property
    def host(self) -> str:
        assert self._main is not None, "start() the gateway first"
        return self._main.host

    @property
    def port(self) -> int:
        assert self._main is not None, "start() the gateway first"
        return self._main.port

    async def start(self) -> None:
        settings = self.settings
        resolver = None if settings.allow_private_upstream else PublicOnlyResolver()
        client = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(resolver=resolver, limit=0),
            timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=settings.connect_timeout_sec, sock_read=settings.read_timeout_sec
            ),
            trust_env=False,  # no proxy from the worker's environment between the gateway and upstream
            auto_decompress=True,
        )
        limits = Limits(settings.max_body_bytes, settings.max_event_bytes, settings.max_recorded_chars)
        self._forwarder = Forwarder(client, limits)
        family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((settings.host, settings.port))
            sock.listen(256)
        except OSError:
            sock.close()
            await client.close()
            raise
        self._main = await self.add_listener(sock)

    async def add_listener(self, sock: socket.socket, *, trial_id: str | None = None) -> Listener:
        """Serve a socket already bound and listening (the gateway owns it from now on and closes
        it on removal)."""
        listener = Listener(sock, trial_id)
        listener.web = web.Server(
            functools.partial(self._handle, listener),
            handler_cancellation=True,
            keepalive_timeout=self.settings.keepalive_timeout_sec,
            access_log=None,
        )
        loop = asyncio.get_running_loop()
        listener.server = await loop.create_server(listener.web, sock=sock, backlog=256)
        self._listeners.append(listener)
        return listener

    async def remove_listener(self, listener: Listener) -> None:
        """Stop serving a listener and close its connections (calls on them end as the agent's)."""
        if listener not in self._listeners:
            return
        self._listeners.remove(listener)
        assert listener.server is not None and listener.web is not None
        listener.server.close()
        for connection in listener.web.connections:
            connection.force_close()  # its call in progress is cancelled (handler_cancellation)
        await listener.server.wait_closed()

    def open_session(self, trial_id: str, upstream: Upstream, max_calls: int | None = None) -> GatewaySession:
        """A new token for `trial_id` that unlocks `upstream` (for at most `max_calls` generations
        when given); UpstreamRefused when the gateway may not connect there."""
        check_upstream(upstream, self.settings.allow_private_upstream)
        session = GatewaySession(trial_id, upstream, self.host, self.port, self._revoke, max_calls)
        self._sessions[session.token] = session
        return session

    def _revoke(self, token: str) -> None:
        self._sessions.pop(token, None)

    async def stop(self) -> None:
        """Close every session (ending the calls in progress), every listener and the upstream
        connections."""
        for session in list(self._sessions.values()):
            session.close()
        for listener in list(self._listeners):
            await self.remove_listener(listener)
        if self._forwarder is not None:
            await self._forwarder.client.close()
            self._forwarder = None
        self._main = None

    def _session_for(
        self, listener: Listener, request: web.BaseRequest, query_key: str | None = None
    ) -> GatewaySession | None:
        for token in [*presented_tokens(request.headers), *([query_key] if query_key else [])]:
            session = self._sessions.get(token)
            if session is not None and listener.trial_id in (None, session.trial_id):
                return session
        return None

    async def _handle(self, listener: Listener, request: web.BaseRequest) -> web.StreamResponse:
        anthropic_caller = "anthropic-version" in request.headers
        try:
            gemini = gemini_target(request.method, request.raw_path)
        except TargetRefused as refused:
            return error_response("gemini", refused.status, refused.message)
        if gemini is not None:
            return await self._handle_gemini(listener, request, gemini)
        try:
            route, query = match(request.method, request.raw_path)
        except TargetRefused as refused:
            return error_response(error_protocol(None, anthropic_caller), refused.status, refused.message)
        session = self._session_for(listener, request)
        if session is None:
            unauthorised = error_response(
                error_protocol(route, anthropic_caller), 401, "missing, unknown or revoked gateway token"
            )
            unauthorised.headers["WWW-Authenticate"] = "Bearer"
            return unauthorised
        protocol = session.upstream.protocol
        if route.protocol not in (None, protocol):
            names = {
                "openai": "OpenAI protocol (a base URL ending in /v1)",
                "anthropic": "Anthropic Messages protocol (the root as base URL)",
            }
            message = f"this trial's model speaks the {names[protocol]}; {route.path} is not part of it"
            return error_response(protocol, 404, message)
        assert self._forwarder is not None
        return await self._forwarder.handle(session, route, request, query)

    async def _handle_gemini(
        self, listener: Listener, request: web.BaseRequest, call: GeminiCall
    ) -> web.StreamResponse:
        session = self._session_for(listener, request, call.key)
        if session is None:
            return error_response("gemini", 401, "missing, unknown or revoked gateway token")
        assert self._forwarder is not None
        return await handle_gemini(self._forwarder, session, call, request)

    def __repr__(self) -> str:
        address: Any = f"{self._main.host}:{self._main.port}" if self._main else "not started"
        return f"ModelGateway({address}, {len(self._sessions)} sessions)"
