"""The kinds of operation whose answer is not one JSON document (see `envloop.operations.operation`, whose
docstring shows how each is declared): events as they happen (`Events`), bytes never held whole
(`Download`), and a local file or folder sent with form fields (`Upload`)."""

import importlib
import time
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from pydantic import BaseModel

from envloop.operations.operation import Operation, P, Req, Resp, Scope

E = TypeVar("E")
E_co = TypeVar("E_co", covariant=True)

FEED_POLL_SEC = 0.5
"""How often an events operation reads its feed, in process and for the server's event stream."""

PROGRESS_STREAM = "A stream of `job` and `trial` events, then `end` (data: the final job)"
"""The stream of a job's (or a rollout's) progress, as `Events` operations describe it."""

CHUNK_BYTES = 1024 * 1024
"""The pieces a download is read in, so a long file never sits in memory."""


class Event(Protocol):
    """One event of a feed: its name (the SSE event) and its JSON (the SSE data)."""

    @property
    def event(self) -> str: ...

    def model_dump_json(self) -> str: ...


class Feed(Protocol[E_co]):
    """What an events operation's service function returns: the changes, one `poll()` at a time,
    until `finished`; `outcome` is the data of the `end` event that closes a stream. Made when the
    operation is called, so an unknown thing fails before the first event."""

    @property
    def finished(self) -> bool: ...

    @property
    def outcome(self) -> BaseModel: ...

    def poll(self) -> Sequence[E_co]: ...


class Events(Operation[P, Req, Iterator[E]]):
    """A GET answered by events as they happen, until the feed finishes: server-sent over HTTP
    (`event: NAME`, the event's JSON as data, then `event: end`), which `envloop.Client` reads back
    into `event` (a model, or a union of models told apart by their `event` field); in process, the
    service function's `Feed` polled every FEED_POLL_SEC."""

    def __init__(
        self,
        path: str,
        request: Callable[P, Req],
        event: type[E],
        *,
        service: Callable[..., Any],
        tag: str,
        stream_doc: str,
        scope: Scope = "project",
        doc: str | None = None,
        route_name: str | None = None,
    ) -> None:
        """`stream_doc` is how the OpenAPI document describes the stream."""
        super().__init__(
            "GET",
            path,
            request,
            cast(Any, event),
            service=service,
            tag=tag,
            scope=scope,
            doc=doc,
            route_name=route_name,
        )
        self.stream_doc = stream_doc

    @property
    def event(self) -> type[E]:
        return cast(type[E], self.response)

    @property
    def returns(self) -> Any:
        return Iterator[self.event]  # type: ignore[name-defined]

    def serve(self, ctx: Any, request: Req) -> Iterator[E]:
        feed = cast(Feed[E], self.answer(ctx, request))  # an unknown thing fails here, before any event

        def events() -> Iterator[E]:
            while True:
                yield from feed.poll()
                if feed.finished:
                    return
                time.sleep(FEED_POLL_SEC)

        return events()


class Download(Operation[P, Req, Iterator[bytes]]):
    """A GET answered by bytes, in chunks, never held whole: the service function gives a file's
    `Path` (the route sends it with its length, and parts of it for HTTP Range requests), `bytes`, or
    an iterator of chunks (text or bytes), written as it is read. `envloop.Client` streams the
    answer; in process it is read a chunk at a time. `media_type` says what the bytes are; `schema`
    ("module:name", imported on first use) types a JSON answer for the OpenAPI document, which
    describes the answer as `answer_doc`."""

    def __init__(
        self,
        path: str,
        request: Callable[P, Req],
        *,
        service: Callable[..., Any],
        tag: str,
        scope: Scope = "project",
        doc: str | None = None,
        route_name: str | None = None,
        media_type: str = "application/octet-stream",
        schema: str | None = None,
        answer_doc: str = "The file's bytes",
    ) -> None:
        super().__init__(
            "GET",
            path,
            request,
            cast(Any, bytes),
            service=service,
            tag=tag,
            scope=scope,
            doc=doc,
            route_name=route_name,
        )
        self.media_type = media_type
        self._schema = schema
        self.answer_doc = answer_doc

    @property
    def schema(self) -> Any:
        """The JSON answer's type, for the OpenAPI document; None for bytes of another kind."""
        if self._schema is None:
            return None
        module, _, name = self._schema.partition(":")
        return getattr(importlib.import_module(module), name)

    @property
    def returns(self) -> Any:
        return Iterator[bytes]

    def serve(self, ctx: Any, request: Req) -> Iterator[bytes]:
        body = self.answer(ctx, request)  # an unknown thing fails here, before any chunk
        if isinstance(body, bytes):
            return iter([body])
        if isinstance(body, Path):
            return _file_chunks(body)
        return (chunk.encode() if isinstance(chunk, str) else chunk for chunk in body)


def _file_chunks(file: Path) -> Iterator[bytes]:
    with file.open("rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            yield chunk


class Upload(Operation[P, Req, Resp]):
    """A POST of a local file or folder (the request's `file` field, a `Path`) with the other fields
    as form fields: `envloop.Client` sends the file, or the folder packed as a .tar.gz
    (`envloop.uploads`), as the multipart part `part`; the route unpacks it into a scratch folder
    (`envloop.api.uploads`) and gives the service function that path. In process the service
    function reads the path itself."""

    def __init__(
        self,
        path: str,
        request: Callable[P, Req],
        response: type[Resp],
        *,
        file: str,
        part: str,
        service: Callable[..., Any],
        tag: str,
        doc: str | None = None,
        status_code: int = 200,
        existing: Callable[[Resp], bool] | None = None,
        existing_doc: str = "",
    ) -> None:
        super().__init__(
            "POST",
            path,
            request,
            response,
            service=service,
            tag=tag,
            doc=doc,
            status_code=status_code,
            existing=existing,
            existing_doc=existing_doc,
        )
        self.file = file
        self.part = part

    @cached_property
    def form_params(self) -> list[str]:
        """The fields sent as form fields: all but the file."""
        return [name for name in self.other_params if name != self.file]
