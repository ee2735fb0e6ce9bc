"""Bytes on their way to the agent: protocol errors, server-sent events cut whole, and the real key
masked out of everything.

A streamed answer is forwarded event by event: an event is sent as soon as its blank line arrives,
so nothing waits for the rest of the stream, and each event is masked whole (a key cannot straddle
two sends). Any other body is masked while it streams through, holding back only the last few
bytes that could begin the key.
"""

import json
import re
from typing import Any

from envloop.gateway.routes import Route
from envloop.models.protocol_errors import ErrorProtocol, error_body

MASK = b"[masked]"
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


def error_protocol(route: Route | None, anthropic_caller: bool) -> ErrorProtocol:
    """Whose error shape an answer takes: the route's protocol, or for a route of both (or none),
    the caller's (Anthropic SDKs send `anthropic-version`)."""
    if route is not None and route.protocol is not None:
        return route.protocol
    return "anthropic" if anthropic_caller else "openai"


def error_json(protocol: ErrorProtocol, status: int, message: str) -> bytes:
    """A whole error answer: one line of JSON."""
    return json.dumps(error_body(protocol, status, message)).encode()


def error_event(route: Route, message: str) -> bytes:
    """A failure after a stream started, as the protocol's own error event: the SDKs raise it."""
    if route.protocol == "anthropic":
        data: dict[str, Any] = error_body("anthropic", 502, message)
        return b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"
    error = {"message": message, "type": "server_error", "param": None, "code": "upstream_error"}
    if route.api == "responses":
        data = {"type": "error", "code": "upstream_error", "message": message, "param": None, "error": error}
        return b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"
    return b"data: " + json.dumps({"error": error}).encode() + b"\n\n"


class Masker:
    """Replaces the key (and its JSON-escaped spelling, where that differs) with MASK."""

    def __init__(self, secret: str | None) -> None:
        spellings = {secret, json.dumps(secret)[1:-1]} if secret else set()
        self._texts = sorted((s for s in spellings if s), key=len, reverse=True)
        self._secrets = [s.encode() for s in self._texts]
        self._hold = max((len(s) for s in self._secrets), default=1) - 1
        self._pending = b""

    def mask(self, data: bytes) -> bytes:
        for secret in self._secrets:
            data = data.replace(secret, MASK)
        return data

    def mask_text(self, text: str) -> str:
        for secret in self._texts:
            text = text.replace(secret, MASK.decode())
        return text

    def feed(self, chunk: bytes) -> bytes:
        """Masked bytes that can be sent now; the tail that could begin a key waits for more."""
        data = self.mask(self._pending + chunk)
        if self._hold == 0:
            self._pending = b""
            return data
        self._pending = data[-self._hold :]
        return data[: -self._hold]

    def flush(self) -> bytes:
        data, self._pending = self.mask(self._pending), b""
        return data


class EventSplitter:
    """Cuts a stream into whole events. An event longer than `limit` bytes is passed on in pieces
    as it comes (masked with holdback), and not parsed: memory stays bounded whatever the upstream
    sends."""

    def __init__(self, masker: Masker, limit: int) -> None:
        self._masker = masker
        self._limit = limit
        self._buffer = b""
        self._oversized = False
        self.skipped = False
        """Whether an event was passed on unparsed (too long to read)."""

    def feed(self, chunk: bytes) -> list[tuple[bytes, bool]]:
        """(masked bytes, whether they are one whole event) pairs, in order."""
        scan = max(0, len(self._buffer) - 3)  # the buffer holds no whole event: look at what is new
        self._buffer += chunk
        out: list[tuple[bytes, bool]] = []
        start = 0
        for end in _EVENT_END.finditer(self._buffer, scan):
            raw = self._buffer[start : end.end()]
            start = end.end()
            if self._oversized:  # the tail of an event already passed on in pieces
                out.append((self._masker.feed(raw) + self._masker.flush(), False))
                self._oversized = False
            else:
                out.append((self._masker.mask(raw), True))
        self._buffer = self._buffer[start:]
        if len(self._buffer) > self._limit:
            self._oversized = self.skipped = True
            out.append((self._masker.feed(self._buffer), False))
            self._buffer = b""
        return out

    def flush(self) -> bytes:
        """Whatever is left when the stream ends (an event without its blank line)."""
        rest, self._buffer = self._buffer, b""
        return self._masker.feed(rest) + self._masker.flush() if self._oversized else self._masker.mask(rest)


def parse_event(raw: bytes) -> tuple[str | None, Any]:
    """An event's name and its data: JSON, or the text when it is not JSON (`[DONE]`), or None
    when the event has no data (a comment)."""
    name: str | None = None
    data: list[str] = []
    for line in raw.decode("utf-8", "replace").splitlines():
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    if not data:
        return name, None
    text = "\n".join(data)
    try:
        return name, json.loads(text)
    except ValueError:
        return name, text
