"""`envloop.Client`: the service layer's operations over the HTTP API, with the same names and types.

Each method is the service function of the same name without its context argument, and returns
the same pydantic model, so code (and the CLI) can switch between the embedded store and a server
without changing anything else. Errors come back as the same exception classes: bad input is a
`UserError`, unknown things a `NotFoundError`, contradictions a `ConflictError`.

    with Client() as client:             # ENVLOOP_URL and ENVLOOP_API_KEY
        job = client.submit_job(JobRequest(dataset="bench@1", profiles=["team/agent@1"])).job
        for event in client.watch_job(job.id):
            ...
"""

import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import httpx
from pydantic import TypeAdapter, ValidationError

from envloop.errors import ConflictError, NotFoundError, ServerError, UserError
from envloop.operations import Operations
from envloop.operations.kinds import Download, Events, Upload
from envloop.operations.operation import Operation, Req, Resp
from envloop.settings import settings
from envloop.uploads import packed

_M = TypeVar("_M")


class AccessError(UserError):
    """The server refused the credentials (401) or what they may do (403)."""


@contextmanager
def _transport(url: str) -> Iterator[None]:
    """A transport failure (refused, timed out, cut off mid-stream) as one ServerError line."""
    try:
        yield
    except httpx.TransportError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ServerError(f"lost the connection to the envloop server at {url}: {reason}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ServerError(
            f"the server at {url} answered something that is not the API's: {first['msg']}"
        ) from None


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip().splitlines()[0] if response.text.strip() else response.reason_phrase
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        first = detail[0]
        where = ".".join(str(p) for p in first.get("loc", []) if p != "body")
        return f"{where}: {first.get('msg', 'invalid')}" if where else str(first.get("msg", "invalid"))
    return str(detail) if detail is not None else response.reason_phrase


def _tls_verification(url: str) -> ssl.SSLContext | bool:
    """Certificate checks for a server at `url`: the default (certifi's roots) for https; for plain
    http a context that trusts no one, since the client only sends paths under `url` and never
    follows redirects, so it is never used. Loading the roots costs tens of milliseconds, a large part
    of a short command's start-up against a local or in-cluster http server."""
    if url.lower().startswith("https://"):
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class Client(Operations):
    """A connection to an envloop server; `url` and `api_key` default to ENVLOOP_URL / ENVLOOP_API_KEY."""

    def __init__(self, url: str | None = None, api_key: str | None = None, timeout: float = 120.0) -> None:
        chosen = settings()
        url = url or chosen.url
        if not url:
            raise UserError("no server given: set ENVLOOP_URL (and ENVLOOP_API_KEY)")
        token = api_key if api_key is not None else chosen.api_key and chosen.api_key.get_secret_value()
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout, verify=_tls_verification(self.url)
        )

    def close(self) -> None:
        self._http.close()

    def call(self, operation: Operation[..., Req, Resp], request: Req) -> Resp:
        """Send a declared operation's request to its route and read its answer: a model, events as
        they come (`Events`), a file's bytes as they come (`Download`), after an upload (`Upload`)."""
        path = operation.url(request)
        if isinstance(operation, Events):
            return cast(Resp, self._events(operation, request))
        if isinstance(operation, Download):
            return cast(Resp, self._download(path, operation.query(request)))
        if isinstance(operation, Upload):
            return cast(Resp, self._upload(operation, request))
        if operation.method == "GET":
            return self._parse(self._send("GET", path, params=operation.query(request)), operation.response)
        return self._parse(self._send("POST", path, json=operation.json_body(request)), operation.response)

    # -- plumbing -----------------------------------------------------------------------------------

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ServerError(f"cannot reach the envloop server at {self.url}: {reason}") from None
        self._check(response)
        return response

    @staticmethod
    def _check(response: httpx.Response) -> None:
        status = response.status_code
        if status < 400:
            return
        message = _detail(response)
        if status == 404:
            raise NotFoundError(message)
        if status == 409:
            raise ConflictError(message)
        if status in (401, 403):
            raise AccessError(message)
        if status < 500:
            raise UserError(message)
        raise ServerError(f"server error {status}: {message}")

    def _parse(self, response: httpx.Response, model: type[_M]) -> _M:
        with _transport(self.url):
            try:
                data = response.json()
            except ValueError:
                raise ServerError(f"the server at {self.url} answered something that is not JSON") from None
            return TypeAdapter(model).validate_python(data)

    @contextmanager
    def _stream(self, path: str, **kwargs: Any) -> Iterator[httpx.Response]:
        """A streamed answer, checked before its body is read; a cut-off stream is a ServerError."""
        with _transport(self.url), self._http.stream("GET", path, **kwargs) as response:
            if response.status_code >= 400:
                response.read()
                self._check(response)
            yield response

    # -- the kinds of operation ---------------------------------------------------------------------

    def _upload(self, operation: Upload[..., Req, Resp], request: Req) -> Resp:
        fields = operation.arguments(request)
        form = {name: fields[name] for name in operation.form_params if fields[name] is not None}
        with packed(Path(fields[operation.file])) as (filename, handle):
            response = self._send(
                "POST", operation.url(request), data=form, files={operation.part: (filename, handle)}
            )
        return self._parse(response, operation.response)

    def _download(self, path: str, params: dict[str, Any]) -> Iterator[bytes]:
        with self._stream(path, params=params) as response:
            yield from response.iter_bytes()

    def _events(self, operation: Events[..., Req, Any], request: Req) -> Iterator[Any]:
        """Server-sent events read back into the declared event model, until `end`."""
        adapter = TypeAdapter(operation.event)
        timeout = httpx.Timeout(30.0, read=None)
        with self._stream(
            operation.url(request), params=operation.query(request), timeout=timeout
        ) as response:
            event, data = "", []
            for line in response.iter_lines():
                if line.startswith(":"):
                    continue
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())
                elif not line:
                    if event == "end":
                        return
                    if data:
                        yield adapter.validate_json("\n".join(data))
                    event, data = "", []


__all__ = ["AccessError", "Client", "ServerError"]
