"""Talking to the Docker daemon through its Engine API, over its Unix socket.

Containers, commands in them, file copies and networks go through the API (httpx, asynchronous,
one connection pool per worker process): a call costs a millisecond or two, where a `docker`
command-line process costs tens. The Docker SDK for Python would do the same work synchronously,
holding a thread per running command; only a dozen endpoints are needed. Image builds still use
the command-line client (docker/cli.py), because BuildKit (`COPY --chmod`, `RUN --mount`, which
task Dockerfiles use) is reached through it.

Which daemon: `DOCKER_HOST` when it names a `unix://` socket, else /var/run/docker.sock.
"""

import asyncio
import contextlib
import json
import struct
from collections.abc import AsyncIterator, Mapping
from typing import Any, BinaryIO

import httpx

from envloop.environments.capture import Sink
from envloop.environments.docker.cli import DockerError, DockerUnavailableError
from envloop.environments.docker.daemon_socket import socket_path

API_VERSION = "v1.41"
"""Docker 20.10, the oldest daemon envloop runs on (Debian 12's)."""
_STREAM_HEADER = struct.Struct(">BxxxL")


class NotFoundError(DockerError):
    """The daemon has no such container, image, network or path."""


class Engine:
    """An Engine API client for the current event loop."""

    def __init__(self, socket: str | None = None) -> None:
        # Plain HTTP over the daemon's socket: no TLS is ever negotiated, so no CA bundle is loaded
        # (verifying would read it at every worker's first Docker call, 0.09 s, for nothing).
        transport = httpx.AsyncHTTPTransport(uds=socket or socket_path(), verify=False)
        self._client = httpx.AsyncClient(
            transport=transport,
            base_url=f"http://docker/{API_VERSION}",
            timeout=httpx.Timeout(120.0, connect=10.0),
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: object = None,
        content: bytes | None = None,
        timeout: float | None = 120.0,
    ) -> httpx.Response:
        """One API call; a daemon error raises DockerError with the daemon's own message."""
        try:
            response = await self._client.request(
                method,
                path,
                params=params,
                json=body,
                content=content,
                timeout=timeout,
                headers={"Content-Type": "application/x-tar"} if content is not None else None,
            )
        except httpx.TransportError as exc:
            raise DockerUnavailableError(f"no Docker daemon answers ({type(exc).__name__})") from None
        _check(response, method, path)
        return response

    async def json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self.request(method, path, **kwargs)
        return response.json() if response.content else None

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, path: str, *, params: Mapping[str, str] | None = None, body: object = None
    ) -> AsyncIterator[httpx.Response]:
        """A streamed call (exec output, archives), with no time limit of its own."""
        try:
            async with self._client.stream(method, path, params=params, json=body, timeout=None) as response:
                if response.status_code >= 400:
                    await response.aread()
                    _check(response, method, path)
                yield response
        except httpx.TransportError as exc:
            raise DockerUnavailableError(f"no Docker daemon answers ({type(exc).__name__})") from None

    async def put_archive(self, container: str, path: str, archive: BinaryIO) -> None:
        """Unpack the tar stream `archive` into `path` (a directory) of the container."""
        data = await asyncio.to_thread(archive.read)
        await self.request("PUT", f"/containers/{container}/archive", params={"path": path}, content=data)


def _check(response: httpx.Response, method: str, path: str) -> None:
    if response.status_code < 400:
        return
    try:
        message = str(json.loads(response.content).get("message", ""))
    except (ValueError, AttributeError):
        message = response.text
    message = " ".join(message.split())[:400] or f"HTTP {response.status_code}"
    if response.status_code == 404:
        raise NotFoundError(message)
    raise DockerError(f"{method} {path.split('?', maxsplit=1)[0].split('/')[1]}: {message}")


async def demultiplex(response: httpx.Response, stdout: Sink, stderr: Sink) -> None:
    """Write a non-TTY exec's multiplexed stream (8-byte frame headers: stream, size) to the two
    sinks as it arrives, a frame's bytes as they come: never more than one chunk is held, however
    long a frame says it is."""
    header = b""
    target: Sink | None = None
    left = 0
    targets = {1: stdout, 2: stderr}
    async for chunk in response.aiter_raw():
        view = memoryview(chunk)
        while view:
            if left:
                piece = view[:left]
                if target is not None:
                    target.write(bytes(piece))
                left -= len(piece)
                view = view[len(piece) :]
                continue
            need = _STREAM_HEADER.size - len(header)
            header += bytes(view[:need])
            view = view[need:]
            if len(header) == _STREAM_HEADER.size:
                stream, left = _STREAM_HEADER.unpack(header)
                target, header = targets.get(stream), b""


_ENGINES: dict[asyncio.AbstractEventLoop, Engine] = {}


def engine() -> Engine:
    """The client of the running event loop (made on first use; a connection pool is bound to the
    loop that opened it)."""
    loop = asyncio.get_running_loop()
    found = _ENGINES.get(loop)
    if found is None:
        for stale in [other for other in _ENGINES if other.is_closed()]:
            del _ENGINES[stale]
        found = _ENGINES[loop] = Engine()
    return found


async def image_id(reference: str) -> str | None:
    """The local image's ID, or None when the daemon has no image of that name."""
    try:
        found = await engine().json("GET", f"/images/{reference}/json")
    except NotFoundError:
        return None
    return str(found.get("Id") or "") or None
