"""The destinations a trial's commands asked its egress proxy for, or looked up themselves, kept
on the trial's record.

A container trial whose phase is `public` or `allowlist` sends its HTTP(S) traffic through a proxy
that logs every request (environments/docker/egress.py); what it asked for, and what came of it, is
the record a reader needs to tell a task that depends on a host this machine cannot reach from an
agent that went astray. Each destination is a host and port with its requests counted by result.
A `public` phase's traffic that ignores the proxy goes out directly, after looking its host up
through a resolver that logs the lookups (environments/docker/dns_observer.py): a name looked up
but never asked of the proxy is a destination of its own, port 0, its lookups counted by result
(`resolved`, `unresolved`, `unanswered`; what came of connecting to it is not seen).

The record is bounded: an agent that asks for thousands of names would otherwise write them all to
the trial's row. `MAX_DESTINATIONS` are listed; the rest are counted. When there are more, the ones
listed are those with a request that did not reach its host first (what a reader looks for), then
the most asked for; they are listed in the order they were first asked for.
"""

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import Field, PrivateAttr

from envloop.core.lazy import LazyModel
from envloop.core.words import plural

DestinationResult = Literal[
    "reached", "resolved", "refused", "unresolved", "unanswered", "unconnected", "other"
]
"""What came of one request: `reached` (the host answered, whatever its answer, or the tunnel
opened), `refused` (the allowlist does not name the host, or its port), `unresolved` (the name gave
no address), `unconnected` (an address was found, but no connection or answer came from it, or
the client gave up waiting for one),
`other` (the proxy refused the request itself: malformed, or one it cannot forward). Of one lookup
made directly: `resolved` (it gave addresses), `unresolved` (the name has none), `unanswered` (the
resolvers failed or did not answer)."""
RESULTS: tuple[DestinationResult, ...] = (
    "reached", "resolved", "refused", "unresolved", "unanswered", "unconnected", "other"
)  # fmt: skip
SUCCEEDED: frozenset[DestinationResult] = frozenset({"reached", "resolved"})
MAX_DESTINATIONS = 200
SHOWN = 20
"""The destinations a trial's page or `el trial get` shows by name (those that failed first); its
JSON has them all."""


class Destination(LazyModel):
    host: str = Field(description="the name (or address) asked for, in lower case")
    port: int = Field(
        description="the port asked for (80 for plain HTTP that names none); 0 for a name looked up directly"
    )
    requests: int = Field(ge=1, description="the requests to it, or its lookups")
    results: dict[DestinationResult, int] = Field(description="the requests by result")
    _first: float = PrivateAttr(default=0.0)

    @property
    def first_asked(self) -> float:
        """When it was first asked for (seconds since the epoch): what orders the destinations of
        several environments of one trial. Not kept on the record."""
        return self._first

    def label(self) -> str:
        """`host:port` (an IPv6 address in brackets); the name alone for one looked up directly."""
        if not self.port:
            return self.host
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def summary(self) -> str:
        """`3 requests: 2 reached, 1 unresolved`, or `2 direct lookups: 2 resolved`."""
        counts = ", ".join(f"{self.results[result]} {result}" for result in RESULTS if result in self.results)
        return f"{plural(self.requests, 'request' if self.port else 'direct lookup')}: {counts}"


class Destinations(LazyModel):
    """What a trial asked its proxy for, and the names it looked up itself (absent on a trial
    whose network was not observed: a closed one, or one in the local sandbox)."""

    listed: list[Destination] = Field(description=f"at most {MAX_DESTINATIONS}, in the order first asked for")
    more_destinations: int = Field(default=0, description="destinations asked for beyond those listed")
    more_requests: int = Field(default=0, description="the requests to them")

    def failed(self) -> list[Destination]:
        """The listed destinations with a request that did not reach its host."""
        return [one for one in self.listed if failing(one)]

    def shown(self, most: int = SHOWN) -> list[Destination]:
        """Up to `most` listed destinations to show by name: every one that failed, then the first
        that did not, in the listed order."""
        failed = self.failed()
        room = max(0, most - len(failed))
        reached = [one for one in self.listed if one not in failed][:room]
        return [one for one in self.listed if one in failed or one in reached]

    def unshown(self, most: int = SHOWN) -> int:
        """Destinations left out of `shown(most)`, those beyond the list included."""
        return len(self.listed) - len(self.shown(most)) + self.more_destinations


def asked(host: str, port: int, results: Mapping[DestinationResult, int], first: float) -> Destination:
    """A destination asked for `results` (requests by result), first at `first`."""
    found = Destination(
        host=host,
        port=port,
        requests=sum(results.values()),
        results={result: results[result] for result in RESULTS if results.get(result)},
    )
    found._first = first
    return found


def record(destinations: Iterable[Destination], limit: int = MAX_DESTINATIONS) -> Destinations:
    """The trial's record of `destinations` (those of each environment it opened; one asked for in
    two is counted once, from when it was first asked for), bounded to `limit` listed."""
    counts: dict[tuple[str, int], Counter[DestinationResult]] = {}
    first: dict[tuple[str, int], float] = {}
    for one in destinations:
        key = (one.host, one.port)
        counts.setdefault(key, Counter()).update(one.results)
        first[key] = min(first.get(key, one.first_asked), one.first_asked)
    merged = {key: asked(*key, counts[key], first[key]) for key in sorted(counts, key=first.__getitem__)}
    order = {key: position for position, key in enumerate(merged)}

    def rank(key: tuple[str, int]) -> tuple[bool, int, int]:
        return (not failing(merged[key]), -merged[key].requests, order[key])

    ranked = sorted(merged, key=rank)
    kept, left = sorted(ranked[:limit], key=order.__getitem__), ranked[limit:]
    return Destinations(
        listed=[merged[key] for key in kept],
        more_destinations=len(left),
        more_requests=sum(merged[key].requests for key in left),
    )


def failing(destination: Destination) -> bool:
    """Whether a request to `destination` did not reach it (or a lookup of it gave no address)."""
    return any(result not in SUCCEEDED for result in destination.results)


def masked(destinations: Destinations, secrets: Iterable[str]) -> Destinations:
    """`destinations` with every secret value masked in its hosts: a host is a name the agent chose
    (`$KEY.example.com`), and a name is compared without regard to case."""
    wanted = sorted({s.lower() for s in secrets if s}, key=len, reverse=True)
    if not wanted:
        return destinations

    def mask(host: str) -> str:
        for secret in wanted:
            host = host.replace(secret, "***")
        return host

    listed = [one.model_copy(update={"host": mask(one.host)}) for one in destinations.listed]
    return destinations.model_copy(update={"listed": listed})
