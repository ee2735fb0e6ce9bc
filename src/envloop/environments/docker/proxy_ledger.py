"""What a shared egress proxy did, and for which trial: its access log, read a piece at a time.

A proxy serves every trial of a worker (shared_egress.py), so its log mixes them. Each line names
the client's address on the shared bridge and when the request began (Squid logs a request when it
ends: its end time less its duration). A trial container holds its address from the moment it
joins the bridge until it leaves it, and speaks from that address alone (bridge_rules.py's source rule
for its bridge port): a request from that address within that span is the trial's, and no other
trial's. An address used again by a later container falls in another span, so a request a gone
container left hanging (logged when it times out) is never charged to the next one.

Each line also says what came of the request (core.destinations.DestinationResult): Squid's own
error, if it made one, and the address it connected to, if it found one. A name that does not
resolve leaves no address (Squid 5 calls it `ERR_CANNOT_FORWARD` for a tunnel, `ERR_READ_ERROR`
for plain HTTP, `ERR_DNS_FAIL` elsewhere); an address that refuses leaves its address and
`ERR_CONNECT_FAIL` (or a read error or timeout); one that never answers (a firewall drops the
packets) leaves `ERR_CLIENT_GONE` and no status once the client gives up. A tunnel still waiting for
its host when the log is last read is not in it yet.

The log is read from where the last reading stopped; what has been read is kept only while a trial
may still ask for it (`forget_before`).
"""

import threading
from typing import NamedTuple
from urllib.parse import urlsplit

from envloop.core.destinations import DestinationResult

LOG_FORMAT = "%ts.%03tu %tr %>a %rm %ru %>Hs %Ss %Sh %err_code %<a"
"""Squid's `logformat`: end time, duration (ms), client address, method, URL, status, result, how,
Squid's own error (`-`: none), the address it connected to (`-`: none)."""
_NETWORK_ERRORS = frozenset(
    {
        "ERR_DNS_FAIL",
        "ERR_CANNOT_FORWARD",
        "ERR_CONNECT_FAIL",
        "ERR_READ_ERROR",
        "ERR_READ_TIMEOUT",
        "ERR_WRITE_ERROR",
        "ERR_ZERO_SIZE_OBJECT",
        "ERR_GATEWAY_FAILURE",
    }
)
"""Squid's errors for a destination it could not get an answer from (the rest refuse the request)."""
_DEFAULT_PORTS = {"http": 80, "https": 443, "ftp": 21}
_MOST_HOST_CHARS = 253
"""The longest DNS name: what a log line holds beyond it is no host's."""


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
    host: str = ""
    """The destination's host alone, in lower case (an IPv6 address without brackets)."""
    port: int = 0
    """The destination's port (a URL's scheme's when it names none)."""
    result: DestinationResult = "reached"
    """What came of it (core.destinations.DestinationResult)."""


class Span(NamedTuple):
    """Where and when one trial container spoke to a proxy: its address, from `since` to `until`
    (None: still there)."""

    client: str
    since: float
    until: float | None


def parse(line: str) -> Request | None:
    """One line of LOG_FORMAT, None for anything else."""
    words = line.split()
    if len(words) != 10:
        return None
    ended, duration, client, _, url, status, result, hierarchy, error, server = words
    try:
        started = float(ended) - int(duration) / 1000
    except ValueError:
        return None
    code = int(status) if status.isdigit() else 0
    denied = result.startswith("TCP_DENIED")
    failed = not denied and 500 <= code <= 504 and hierarchy == "HIER_NONE"
    destination = url.split("://", 1)[-1].split("/", 1)[0]
    host, port = _host_and_port(url)
    return Request(
        started, client, destination, failed, denied, host, port, _result(denied, code, error, server)
    )


def _result(denied: bool, code: int, error: str, server: str) -> DestinationResult:
    if denied:
        return "refused"
    if error == "-" or (server != "-" and 100 <= code < 400):  # answered, or a tunnel that opened
        return "reached"
    if error == "ERR_CLIENT_GONE" and code == 0:  # the client gave up before any answer came
        return "unconnected"
    if error not in _NETWORK_ERRORS:
        return "other"
    return "unresolved" if server == "-" or error == "ERR_DNS_FAIL" else "unconnected"


def _host_and_port(url: str) -> tuple[str, int]:
    """A logged URL's host and port: `host:port` for a tunnel, `scheme://[user@]host[:port]/…`
    otherwise. Anything unreadable as a host is kept as it is written (cut to a DNS name's length)."""
    scheme, _, rest = url.rpartition("://")
    try:
        parts = urlsplit(f"//{rest}")
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host:
        return rest.split("/", 1)[0][:_MOST_HOST_CHARS].lower(), 0
    return host[:_MOST_HOST_CHARS], port if port is not None else _DEFAULT_PORTS.get(scheme.lower(), 0)


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
