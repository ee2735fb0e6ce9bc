"""The worker process's one DNS observer (dns_observer.py), shared by its public trials: started
by the first that asks, on the shared public bridge's gateway address, and kept while the process
lives, as the shared networks and proxies are (shared_egress.py, which closes it with them).

Its log holds every trial's lookups; each trial holding it says from when its own begin, so the
log is forgotten up to the start of the earliest trial still holding it. Where the observer cannot
listen (the port is another's on this host), trials run without it: their lookups go unrecorded.
"""

import asyncio
import functools
import time
from collections import Counter
from dataclasses import dataclass, field

from envloop.core.single_flight import SingleFlight
from envloop.environments.base import EnvironmentSetupError
from envloop.environments.docker.bridge_rules import close_observer, open_observer
from envloop.environments.docker.cli import DockerError
from envloop.environments.docker.dns_observer import DnsObserver, upstreams
from envloop.environments.docker.engine import engine


@dataclass(eq=False)
class _Observing:
    """The DNS observer on the public bridge (None: it could not listen there), and when each
    trial holding it began."""

    observer: DnsObserver | None
    bridge: str
    holders: Counter[float] = field(default_factory=Counter)


@dataclass
class _Held:
    observing: _Observing | None = None


_HELD = _Held()
_STARTS: dict[str, SingleFlight[_Observing]] = {}


async def _start(network: str, bridge: str) -> _Observing:
    if _HELD.observing is not None:  # started meanwhile by a trial on another event loop
        return _HELD.observing
    try:
        inspected = await engine().json("GET", f"/networks/{network}")
    except DockerError as exc:
        raise EnvironmentSetupError(f"the shared public network could not be read: {exc}") from None
    configs = (inspected.get("IPAM") or {}).get("Config") or [{}]
    gateway = str(configs[0].get("Gateway") or "")
    observer: DnsObserver | None = DnsObserver(gateway, upstreams) if gateway else None
    if observer is not None:
        try:
            await asyncio.to_thread(observer.start)
        except OSError:  # the port is another's on this host: trials run without the observer
            observer = None
    if observer is not None:
        try:
            await open_observer(bridge, observer.address, observer.port)
        except BaseException:
            await asyncio.to_thread(observer.close)
            raise
    _HELD.observing = observing = _Observing(observer, bridge)
    return observing


async def acquire_observer(since: float, network: str, bridge: str) -> DnsObserver | None:
    """The worker's DNS observer on the shared public `network` (its bridge's interface `bridge`),
    started by the first trial that asks, for a trial whose lookups begin no earlier than `since`;
    None when it could not listen. `release_observer` hands it back."""
    observing = _HELD.observing
    if observing is None:
        starting = SingleFlight(functools.partial(_start, network, bridge), "DNS observer")
        start = _STARTS.setdefault(network, starting)
        observing = await start()
    observing.holders[since] += 1
    return observing.observer


def release_observer(observer: DnsObserver | None, since: float) -> None:
    """Hand the observer back, and forget the lookups no trial still holding it can ask about
    (those before the earliest `since` of them)."""
    observing = _HELD.observing
    if observing is None or observing.observer is not observer:  # closed since (the worker's exit)
        return
    observing.holders[since] -= 1
    observing.holders = +observing.holders
    if observer is not None:
        observer.forget_before(min(observing.holders, default=time.time()))


def observer_in_use() -> bool:
    """Whether this process holds its DNS observer now."""
    return _HELD.observing is not None


async def close_shared_observer() -> None:
    """Stop the observer and close its port on the bridge. Trials still holding it lose it: call
    it when the worker's trials have ended."""
    observing, _HELD.observing = _HELD.observing, None
    if observing is not None and observing.observer is not None:
        observing.observer.close()  # a moment's wait; no worker thread is to be had at the interpreter's exit
        await close_observer(observing.bridge, observing.observer.address, observing.observer.port)
