"""A trial's egress: the shared proxies it uses, where it spoke from, and what they did for it.

A phase whose policy is `allowlist` gives the main container only the worker's shared allowlist
bridge (no route out; and the trial's own internal network when it has sidecars or a model
gateway) and, on it, a Squid proxy for the phase's host list (squid.py), shared by every trial
with that list (shared_egress.py). Commands see the proxy in `HTTP_PROXY`/`HTTPS_PROXY` (both
spellings). Traffic that ignores the proxy has nowhere to go, so the allowlist fails closed.

An allowed host this machine cannot reach (no route to the internet, a name that does not resolve)
would fail the task's checks as if the agent had: the proxy logs every request, and a request it
let through but could not connect (a 5xx Squid made itself, never reaching the host) is named by
`unreachable()`. It counts against the environment (the phase's verdict is not counted) only for a
host the trial depends on: an allowlist entry written out, or a host the task names in its files
(task_hosts.py); a host only the agent asked for, or one a wildcard entry let through, is the
agent's business, and the verdict stands.

A `public` phase has the same problem on a machine without the internet (a task whose solution
fetches a page scores 0 with the oracle), so it is observed too: its container joins the shared
public bridge, where the shared observing proxy (`PUBLIC_HOSTS`) forwards anything, to any port;
HTTP(S) clients that honour the proxy variables (most) go through it and leave a record; traffic
that ignores it still goes out directly, as `public` means. A name under a reserved top-level
domain (`.invalid`, `.test`, …) exists nowhere, so failing to reach one is never this machine's
shortfall. The proxy's own traffic is a public trial's: it cannot reach the host or a private
network either (firewall.py).

A public phase's names are observed too, for traffic that ignores the proxy: the trial's main
container resolves through the worker's DNS observer (dns_observer.py, its `--dns`), whose log is
told apart the same way. A name the trial looked up but never asked the proxy for is on its record
as a destination of its own, without a port (`looked_up`); one the task depends on (task_hosts.py)
that the resolvers failed to answer (SERVFAIL or no answer: not a name that does not exist) counts
against the environment as an unreachable host does, once asked again plainly after the trial's
processes are gone and still not answered (`confirmed`): what the trial's own queries brought
about (a flood the resolvers shed) is the trial's, not the machine's.

A shared proxy's log holds every trial's requests: each is this trial's when it came from the
trial container's address on the shared bridge while the container held it (`Span`s, kept here;
the container's bridge port passes nothing until `join` binds it to that address, then that address
alone until `leave`: bridge_rules.bind_source).

Before the trial hands its proxies back, its requests are counted by destination and result for
its record (`record`, core/destinations.py), from what the proxies logged by the last reading: each
`stop` of the trial's container reads them once its processes are gone, so nothing is read again
at the end.
"""

import asyncio
import time
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

from envloop.core.destinations import Destination, DestinationResult, asked
from envloop.environments.docker.bridge_rules import bind_source, unbind_source
from envloop.environments.docker.containers import Container
from envloop.environments.docker.dns_observer import ADDRESS_TYPES, DnsObserver, Lookup
from envloop.environments.docker.firewall import ensure_host_guard
from envloop.environments.docker.proxy_ledger import Request, Span
from envloop.environments.docker.shared_egress import (
    SharedNetwork,
    SharedProxy,
    acquire_proxy,
    bridge_port,
    release_proxy,
    shared_network,
)
from envloop.environments.docker.shared_observer import acquire_observer, release_observer
from envloop.environments.docker.squid import EGRESS_PORT, PUBLIC_HOSTS
from envloop.tasks.phases import NetworkPolicy

_RESERVED = (".invalid", ".test", ".example", ".localhost", ".local")
"""Top-level domains no name under which can be reached anywhere (RFC 2606, 6761, 6762)."""


class Unreachable(NamedTuple):
    """A destination a proxy let through but could not connect."""

    where: str
    """`host:port` (or the host of a plain HTTP request)."""
    listed: bool
    """Whether an allowlist names its host as it is (not through a wildcard)."""
    looked_up: bool = False
    """A name the trial looked up itself that the resolvers did not answer (no proxy involved)."""


class _Joined(NamedTuple):
    port: str
    address: str
    mac: str
    since: float


class EgressProxies:
    """One run of a trial's use of the shared proxies and bridges."""

    def __init__(self) -> None:
        self.created = time.time()
        """Before the trial's container started: the first span on the bridge it starts on begins here."""
        self._proxies: dict[tuple[str, ...], asyncio.Task[SharedProxy]] = {}
        """Each proxy as it is acquired (or was): a trial's first is asked for beside its container."""
        self._joined: dict[str, _Joined] = {}
        """The shared bridges the container is on now, by network name."""
        self._spans: list[Span] = []
        """Where and when the container was on a shared bridge (closed spans)."""
        self._reported: set[Request] = set()
        self.record: list[Destination] | None = None
        """What the trial asked its proxies for, counted as it handed them back (`remove`); None
        before, and for a trial that used none."""
        self.ever_joined = False
        """Whether the container was ever on a shared bridge (after its start, spans begin when it joins)."""
        self._observing = False
        self._observer: DnsObserver | None = None
        self._reported_lookups: set[Lookup] = set()

    def prestart(self, hosts: tuple[str, ...]) -> None:
        """Ask for the proxy for `hosts` now, while the trial's container starts; `proxy_for` waits
        for it (and raises what its start raised)."""
        if hosts not in self._proxies:
            self._proxies[hosts] = asyncio.ensure_future(acquire_proxy(hosts))

    async def proxy_for(self, hosts: tuple[str, ...], direct: tuple[str, ...] = ()) -> dict[str, str]:
        """The variables that send a command's traffic through the proxy for `hosts`, except to
        the trial's own containers (`main`, and the service names in `direct`). By address: a name
        could resolve to an address of the proxy the trial may not reach."""
        self.prestart(hosts)
        proxy = await self._proxies[hosts]
        url = f"http://{proxy.address}:{EGRESS_PORT}"
        skip = ",".join(["localhost", "127.0.0.1", "::1", "main", *direct])
        return {
            "HTTP_PROXY": url,
            "HTTPS_PROXY": url,
            "http_proxy": url,
            "https_proxy": url,
            "NO_PROXY": skip,
            "no_proxy": skip,
        }

    async def observe_lookups(self) -> DnsObserver | None:
        """The worker's DNS observer, for the trial's main container to resolve through (held
        until `remove`); None when it could not listen."""
        if not self._observing:
            public = await shared_network("public")
            self._observer = await acquire_observer(self.created, public.name, public.bridge)
            self._observing = True
        return self._observer

    def _lookups(self) -> list[Lookup]:
        """The trial's own lookups of addresses, from what the observer logged by now."""
        if self._observer is None:
            return []
        return [one for one in self._observer.lookups(self._all_spans()) if one.kind in ADDRESS_TYPES]

    def joined(self, network: str) -> bool:
        return network in self._joined

    async def join(self, container: Container, network: SharedNetwork, since: float) -> None:
        """The container is on the shared `network` since `since`: bind its bridge port to its
        address there (until now the port passed nothing, whatever its processes sent), and count
        what comes from that address as the trial's."""
        await ensure_host_guard()  # the host's networks are read again for each trial, as before
        address, port, mac = await bridge_port(container.id, network.name)
        await bind_source(port, address, mac)
        self._joined[network.name] = _Joined(port, address, mac, since)
        self.ever_joined = True

    async def leave(self, network: str) -> None:
        """The container left `network` (or is gone): close its span and unbind its port."""
        joined = self._joined.pop(network, None)
        if joined is not None:
            self._spans.append(Span(joined.address, joined.since, time.time()))
            await unbind_source(joined.port, joined.address, joined.mac)

    def _all_spans(self) -> list[Span]:
        return [*self._spans, *(Span(j.address, j.since, None) for j in self._joined.values())]

    async def _requests(self, read: bool = True) -> list[tuple[tuple[str, ...], Request]]:
        """The trial's requests, from what its proxies logged by now (`read`) or by the last reading."""
        spans = self._all_spans()
        found = []
        for hosts, proxy in self._acquired():
            if read:
                await proxy.read()
            found += [(hosts, request) for request in proxy.ledger.requests(spans)]
        return found

    async def contacted(self) -> list[str]:
        """Every destination the trial asked a proxy for (refused ones included), in order."""
        seen: dict[str, None] = {}
        for _, request in sorted(await self._requests(), key=lambda found: found[1].started):
            seen.setdefault(request.destination, None)
        return list(seen)

    async def unreachable(self) -> list[Unreachable]:
        """The allowed destinations the proxies could not reach for this trial since the last call,
        and the names it looked up itself (never asked of a proxy) that the resolvers did not answer."""
        found: list[Unreachable] = []
        for hosts, request in await self._requests():
            if not request.failed or request in self._reported:
                continue
            self._reported.add(request)
            name = request.destination.rsplit(":", 1)[0].lower().rstrip(".")
            if hosts == PUBLIC_HOSTS and name.endswith(_RESERVED):
                continue
            listed = hosts != PUBLIC_HOSTS and name in {host.lower() for host in hosts}
            missed = Unreachable(request.destination, listed)
            if missed not in found:
                found.append(missed)
        asked_proxy = {request.host for _, request in await self._requests(read=False)}
        for lookup in self._lookups():
            if lookup.answer not in ("failed", "timeout") or lookup in self._reported_lookups:
                continue
            self._reported_lookups.add(lookup)
            missed = Unreachable(lookup.name, listed=False, looked_up=True)
            if lookup.name not in asked_proxy and not lookup.name.endswith(_RESERVED) and missed not in found:
                found.append(missed)
        return found

    async def confirmed(self, missed: list[Unreachable]) -> list[Unreachable]:
        """`missed` but the names looked up that the resolvers answer when asked again now (call
        it once the trial's processes are gone); nothing is asked when no lookup is among them."""
        names = {one.where for one in missed if one.looked_up}
        if not names or self._observer is None:
            return missed
        failing = await self._observer.unanswered(names)
        return [one for one in missed if not one.looked_up or one.where in failing]

    async def remove(self) -> None:
        """After the trial's containers are gone: unbind their ports and hand the proxies back (one
        still being acquired included: its acquisition is cancelled or handed back)."""
        for network in list(self._joined):
            await self.leave(network)
        if self._acquired() or self._observer is not None:
            requests = [request for _, request in await self._requests(read=False)]
            asked_proxy = {request.host for request in requests}
            self.record = tally(requests) + looked_up(self._lookups(), asked_proxy)
        if self._observing:
            release_observer(self._observer, self.created)
            self._observing, self._observer = False, None
        for acquiring in self._proxies.values():
            acquiring.cancel()
        await asyncio.gather(*self._proxies.values(), return_exceptions=True)
        for _, proxy in self._acquired():
            await release_proxy(proxy)
        self._proxies.clear()

    def _acquired(self) -> list[tuple[tuple[str, ...], SharedProxy]]:
        return [
            (hosts, acquiring.result())
            for hosts, acquiring in self._proxies.items()
            if acquiring.done() and not acquiring.cancelled() and acquiring.exception() is None
        ]


def tally(requests: Iterable[Request]) -> list[Destination]:
    """`requests` counted by destination and result, in the order each destination was first asked for."""
    counts: dict[tuple[str, int], Counter[DestinationResult]] = {}
    first: dict[tuple[str, int], float] = {}
    for request in sorted(requests, key=lambda request: request.started):
        key = (request.host, request.port)
        counts.setdefault(key, Counter())[request.result] += 1
        first.setdefault(key, request.started)
    return [asked(*key, results, first[key]) for key, results in counts.items()]


def looked_up(lookups: Iterable[Lookup], asked_proxy: set[str]) -> list[Destination]:
    """The names in `lookups` the proxy was never asked for (what the proxy was asked for is on
    the record already, with what came of it), each counted by result in the order first looked
    up: `resolved` when it gave addresses, `unresolved` when it has none (no such name; a type it
    lacks counts as resolved where the name gave addresses of another), `unanswered` when the
    resolvers failed or were silent. Port 0: a lookup names no port."""
    found: dict[str, list[Lookup]] = {}
    for lookup in sorted(lookups, key=lambda lookup: lookup.at):
        if lookup.name not in asked_proxy:
            found.setdefault(lookup.name, []).append(lookup)
    destinations = []
    for name, made in found.items():
        exists = any(one.answer == "addresses" for one in made)
        results = Counter(_lookup_result(one, exists) for one in made)
        destinations.append(asked(name, 0, results, made[0].at))
    return destinations


def _lookup_result(lookup: Lookup, exists: bool) -> DestinationResult:
    if lookup.answer == "addresses" or (lookup.answer == "no-addresses" and exists):
        return "resolved"
    if lookup.answer in ("no-addresses", "no-such-name"):
        return "unresolved"
    return "unanswered"


def proxy_hosts(policy: NetworkPolicy) -> tuple[str, ...] | None:
    """The hosts a phase's proxy lets through (every one for `public`, which it only observes);
    None for a phase without a proxy."""
    if policy.mode == "allowlist":
        return policy.hosts
    return PUBLIC_HOSTS if policy.mode == "public" else None
