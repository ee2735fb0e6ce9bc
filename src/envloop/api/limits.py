"""Request bodies under abuse: credentials are checked before a body is read, and bodies are capped.

FastAPI reads (and a multipart form spools to disk) the whole body before the route's
dependencies run, authentication included: an anonymous 100 MB POST would be read in full just to
be refused with 401. This middleware runs first. A /v1 request that carries a body must present a
valid API key or share token before one byte of it is read, else 401. Every body is capped, by
its declared Content-Length before reading and by counting while it is read: 413 with the limit
named. Uploads (the declared `Upload` operations: a dataset's tasks) get a larger cap
(`ENVLOOP_MAX_UPLOAD_MB`, default 256); what an uploaded archive may unpack to is capped where it
is unpacked (`max_unpacked_bytes`).
"""

import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from anyio import to_thread
from starlette.exceptions import HTTPException

from envloop.operations.declared import declared_operations
from envloop.operations.kinds import Upload
from envloop.services.context import Context
from envloop.services.keys import authenticate_key
from envloop.services.shares import resolve_share
from envloop.settings import settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 1024 * 1024
"""Any request body but an upload: JSON documents of a few kilobytes."""
UPLOAD_PATHS = re.compile(
    "|".join(
        re.sub(r"{\w+:path}", ".+", re.sub(r"{\w+}", "[^/]+", operation.path))
        for operation in declared_operations()
        if isinstance(operation, Upload)
    )
)
"""The paths of the upload operations (`{param}` matching one segment)."""
_MIB = 1024 * 1024


def max_upload_bytes() -> int:
    return settings().max_upload_mb * _MIB


def max_unpacked_bytes() -> int:
    """What an uploaded archive may unpack to: twice the upload cap (a 0.9 MB gzip bomb that
    unpacks to 900 MB is refused with the default)."""
    return 2 * max_upload_bytes()


class BodyTooLarge(HTTPException):
    """Raised while a body is read; an HTTPException, so FastAPI's body parsing lets it through."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than the limit of {_size(limit)}")


def _size(limit: int) -> str:
    return f"{limit // _MIB} MiB" if limit >= _MIB else f"{limit:,} bytes"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _bearer(scope: Scope) -> str | None:
    value = _header(scope, b"authorization") or ""
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def _valid(ctx: Context, token: str) -> bool:
    return authenticate_key(ctx.store, token) is not None or resolve_share(ctx.store, token) is not None


async def _answer(send: Send, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    extra = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class RequestLimits:
    """ASGI middleware: authenticate before reading a body, cap every body (module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        if path.startswith("/v1/"):
            ctx: Context | None = scope["app"].state.context
            token = _bearer(scope)
            if ctx is not None and (token is None or not await to_thread.run_sync(_valid, ctx, token)):
                detail = (
                    "missing credentials: send Authorization: Bearer KEY"
                    if token is None
                    else "unknown, revoked or expired credentials"
                )
                await _answer(send, 401, detail, {"WWW-Authenticate": "Bearer"})
                return
        limit = max_upload_bytes() if UPLOAD_PATHS.fullmatch(path.rstrip("/")) else MAX_BODY_BYTES
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _answer(send, 413, BodyTooLarge(limit).detail)
            return
        await self._capped(scope, receive, send, limit)

    async def _capped(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        received = 0
        started = False

        async def counting() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def watching(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting, watching)
        except BodyTooLarge as exc:
            if started:
                raise
            await _answer(send, 413, exc.detail)
