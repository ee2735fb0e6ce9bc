"""What a shared egress proxy did, and for which trial: its access log, read a piece at a time.

A proxy serves every trial of a worker (shared_egress.py), so its log mixes them. Each line names
the client's address on the shared bridge and when the request began (Squid logs a request when it
ends: its end time less its duration). A trial container holds its address from the moment it
joins the bridge until it leaves it, and speaks from that address alone (firewall.py's source rule
for its bridge port): a request from that address within that span is the trial's, and no other
trial's. An address used again by a later container falls in another span, so a request a gone
container left hanging (logged when it times out) is never charged to the next one.

The log is read from where the last reading stopped; what has been read is kept only while a trial
may still ask for it (`forget_before`).
"""

import threading
from typing import NamedTuple

LOG_FORMAT = "%ts.%03tu %tr %>a %rm %ru %>Hs %Ss %Sh"
"""Squid's `logformat`: end time, duration (ms), client address, method, URL, status, result, how."""


class Request(NamedTuple):
    """One request a proxy logged."""

    started: float
    """When it began (seconds since the epoch, the host's clock: containers share it)."""
    client: str
    """The client's address on the proxy's bridge."""
    destination: str
    """`host:port` of a tunnel, the host of a plain HTTP request."""
    failed: bool
    """Let through, but the proxy could not connect (its own 5xx, no upstream contact)."""
    denied: bool
    """Refused by the proxy's rules (a host an allowlist does not name)."""


class Span(NamedTuple):
    """Where and when one trial container spoke to a proxy: its address, from `since` to `until`
    (None: still there)."""

    client: str
    since: float
    until: float | None


def parse(line: str) -> Request | None:
    """One line of LOG_FORMAT, None for anything else."""
    words = line.split()
    if len(words) != 8:
        return None
    ended, duration, client, _, url, status, result, hierarchy = words
    try:
        started = float(ended) - int(duration) / 1000
    except ValueError:
        return None
    code = int(status) if status.isdigit() else 0
    denied = result.startswith("TCP_DENIED")
    failed = not denied and 500 <= code <= 504 and hierarchy == "HIER_NONE"
    destination = url.split("://", 1)[-1].split("/", 1)[0]
    return Request(started, client, destination, failed, denied)


class ProxyLedger:
    """The requests of one proxy's log read so far. `take` is handed the log as it is now; the
    worker's trials read it from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offset = 0
        self._requests: list[Request] = []

    @property
    def size(self) -> int:
        """Bytes of the log read so far."""
        return self._offset

    def take(self, log: bytes) -> None:
        """Parse what `log` (the whole file, as read now) holds past the last reading; a line still
        being written waits for the next."""
        with self._lock:
            if len(log) < self._offset:  # a log made anew: read from its start
                self._offset = 0
            end = log.rfind(b"\n", self._offset) + 1
            if end <= self._offset:
                return
            fresh = log[self._offset : end].decode(errors="replace").splitlines()
            self._offset = end
            self._requests += [found for found in map(parse, fresh) if found is not None]

    def requests(self, spans: list[Span]) -> list[Request]:
        """The requests made from one of `spans` (its address, within its time)."""
        with self._lock:
            return [
                request
                for request in self._requests
                for span in spans
                if request.client == span.client
                and span.since <= request.started
                and (span.until is None or request.started <= span.until)
            ]

    def forget_before(self, moment: float) -> None:
        """Drop the requests begun before `moment` (no trial still asks about them)."""
        with self._lock:
            self._requests = [request for request in self._requests if request.started >= moment]
