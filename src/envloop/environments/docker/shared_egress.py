"""The networks and egress proxies every trial of a worker process shares: made once, then reused.

A `public` or `allowlist` phase used to cost a trial two bridges and a Squid container of its own,
started, waited for and removed around every trial: most of what a public trial cost beyond the
same container work with the docker CLI. Here they are made by the first trial that asks (trials
that ask together wait for one start: single_flight.py) and kept while the process lives:

- `public`: a bridge (`elp…`: masqueraded, kept from the host by firewall.py, no traffic between
  its containers) that every main container of a `public` phase joins;
- `allowlist`: an internal bridge (`eli…`, no route out) that every main container of an
  `allowlist` phase joins, its only network besides the trial's own internal one;
- proxies: one Squid per distinct host list (`PUBLIC_HOSTS` observes a `public` phase), on the bridge
  its trials join; an allowlist's also on the public bridge, its way out;
- a DNS observer (dns_observer.py, held by shared_observer.py and closed here with the rest): a
  forwarder in this process, on the public bridge's gateway address, that main containers of
  public phases resolve names through (their `--dns`), so the names a trial looks up itself,
  ignoring the proxy, are on its record too.

Trials on one bridge are kept apart by bridge_rules.py (nothing passes between two containers of a
shared bridge but a connection to a proxy's port, on the proxy's own bridge port; a bridge's ports
pass nothing until bound, then their container's own address alone: a proxy's as it starts, a trial
container's as it joins, egress.py), and each proxy's log is told apart by the
client's address and the time of the request (proxy_ledger.py). A proxy whose log has grown past
`_RETIRE_BYTES` is replaced for the trials that come next, and removed once its last trial ends.

Everything is labelled with the worker process: `close_shared_egress` removes it at the worker's
exit (and at the interpreter's, for any process that ran trials), and a killed worker's is swept by
the next one to start (orphans.sweep_orphans, bridge_rules.sweep_rules). The state is the process's,
not an event loop's: it holds names and addresses, and each call goes through the running loop's
client.
"""

import asyncio
import atexit
import contextlib
import functools
import hashlib
import os
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from envloop.core.single_flight import SingleFlight
from envloop.environments.base import EnvironmentSetupError
from envloop.environments.docker.bridge_rules import (
    bind_source,
    close_ports,
    close_proxy,
    open_ports,
    open_proxy,
    seal_bridge,
    unbind_source,
    unseal_bridge,
)
from envloop.environments.docker.cli import DockerError
from envloop.environments.docker.container_spec import ContainerSpec
from envloop.environments.docker.containers import Container
from envloop.environments.docker.engine import NotFoundError, engine
from envloop.environments.docker.firewall import INTERNAL_PREFIX, PUBLIC_PREFIX, ensure_host_guard
from envloop.environments.docker.orphans import MANAGED_LABEL, WORKER_LABEL
from envloop.environments.docker.proxy_ledger import ProxyLedger
from envloop.environments.docker.shared_observer import close_shared_observer, observer_in_use
from envloop.environments.docker.squid import (
    ACCESS_LOG,
    ACCESS_LOG_BYTES,
    EGRESS_PORT,
    LOG_DIR,
    PUBLIC_HOSTS,
    START,
    ensure_egress_image,
    squid_config,
    wait_ready,
)
from envloop.liveness import process_identity

SHARED_LABEL = "envloop.shared"
"""On the shared networks and proxies (`public`, `allowlist`, `proxy`): no trial's own."""
Kind = Literal["public", "allowlist"]
_RETIRE_BYTES = ACCESS_LOG_BYTES // 4


@dataclass(frozen=True)
class SharedNetwork:
    name: str
    bridge: str
    """The bridge's interface on the host (what firewall rules name)."""
    subnet: str
    """Its addresses (what the ARP rule closing its unbound ports names)."""


@dataclass(eq=False)
class SharedProxy:
    """One proxy, the trials using it, and what its log said so far."""

    hosts: tuple[str, ...]
    container: Container
    network: SharedNetwork
    """The bridge its trials reach it on."""
    address: str
    port: str
    """Its bridge port on the host."""
    bound: list[tuple[str, str, str]]
    """Each of its bridge ports with its address and MAC address there (an allowlist's also on the
    public bridge)."""
    ledger: ProxyLedger = field(default_factory=ProxyLedger)
    users: int = 0
    retiring: bool = False

    async def read(self) -> None:
        """Take in what the proxy logged since the last reading."""
        try:
            log = await _access_log(self.container)
        except (DockerError, OSError):
            return
        await asyncio.to_thread(self.ledger.take, log)
        self.retiring = self.retiring or self.ledger.size > _RETIRE_BYTES


@dataclass
class _Pool:
    networks: dict[str, SharedNetwork] = field(default_factory=dict)
    proxies: dict[tuple[str, ...], SharedProxy] = field(default_factory=dict)
    retired: list[SharedProxy] = field(default_factory=list)
    """Proxies replaced while trials still used them."""


_POOL = _Pool()


async def _access_log(container: Container) -> bytes:
    """The proxy's access log (at most its tmpfs's `ACCESS_LOG_BYTES`), read with its own `cat`."""
    with tempfile.TemporaryDirectory(prefix="envloop-proxy-log-") as scratch:
        out = Path(scratch) / "access.log"
        await container.exec(["cat", ACCESS_LOG], stdout=out, timeout=30)
        return out.read_bytes() if out.exists() else b""


def _name(kind: str) -> tuple[str, str]:
    """The network's name and its bridge's interface name (at most 15 characters), this process's."""
    digest = hashlib.sha256(f"{process_identity()}/{kind}".encode()).hexdigest()[:12]
    prefix = INTERNAL_PREFIX if kind == "allowlist" else PUBLIC_PREFIX
    return f"envloop-shared-{digest}-{kind}", prefix + digest


async def _make_network(kind: Kind) -> SharedNetwork:
    if kind in _POOL.networks:
        return _POOL.networks[kind]
    await ensure_host_guard()
    name, bridge = _name(kind)
    labels = {MANAGED_LABEL: "1", WORKER_LABEL: process_identity(), SHARED_LABEL: kind}
    body = {
        "Name": name,
        "Driver": "bridge",
        "Internal": kind == "allowlist",
        "CheckDuplicate": True,
        "Labels": labels,
        "Options": {
            "com.docker.network.bridge.name": bridge,
            "com.docker.network.bridge.enable_icc": "false",
        },
    }
    with contextlib.suppress(DockerError):
        # Or made by this process on an earlier event loop whose state was lost: taken as it is.
        await engine().json("POST", "/networks/create", body=body)
    subnet = _subnet(await engine().json("GET", f"/networks/{name}"))
    if subnet is None:
        raise EnvironmentSetupError(f"the shared {kind} network has no IPv4 subnet to close its ports by")
    await close_ports(bridge, subnet)  # before any container is on it
    if kind == "allowlist":
        await seal_bridge(bridge)
    _POOL.networks[kind] = network = SharedNetwork(name, bridge, subnet)
    _close_at_exit_once()
    return network


def _subnet(inspected: dict[str, Any]) -> str | None:
    for config in (inspected.get("IPAM") or {}).get("Config") or []:
        if ":" not in str(config.get("Subnet") or ":"):
            return str(config["Subnet"])
    return None


_NETWORK_STARTS = {
    kind: SingleFlight(functools.partial(_make_network, kind), f"shared {kind} network")
    for kind in ("public", "allowlist")
}


async def shared_network(kind: Kind) -> SharedNetwork:
    """The process's shared network of `kind`, made by the first trial that asks."""
    return _POOL.networks.get(kind) or await _NETWORK_STARTS[kind]()


def shared_networks() -> list[SharedNetwork]:
    """The shared networks made so far."""
    return list(_POOL.networks.values())


async def bridge_port(container_id: str, network: str) -> tuple[str, str, str]:
    """The container's address on `network`, its bridge port on the host (the veth whose peer
    inside has the container's MAC address there) and that MAC address. The worker runs beside the
    daemon, as root (the host guard needs both): it reads the container's interfaces where the host
    sees them."""
    inspected = await engine().json("GET", f"/containers/{container_id}/json")
    endpoint = ((inspected.get("NetworkSettings") or {}).get("Networks") or {}).get(network) or {}
    address, mac = str(endpoint.get("IPAddress") or ""), str(endpoint.get("MacAddress") or "")
    pid = int((inspected.get("State") or {}).get("Pid") or 0)
    port = await asyncio.to_thread(_host_side, pid, mac) if address and mac and pid else None
    if port is None:
        raise EnvironmentSetupError(
            f"the container's port on network {network} was not found: the worker must run as root "
            "beside the Docker daemon to keep the trials of a shared network apart"
        )
    return address, port, mac.lower()


def _host_side(pid: int, mac: str) -> str | None:
    interfaces = Path(f"/proc/{pid}/root/sys/class/net")
    with contextlib.suppress(OSError):
        for interface in interfaces.iterdir():
            with contextlib.suppress(OSError, ValueError):
                if (interface / "address").read_text().strip() == mac.lower():
                    return socket.if_indextoname(int((interface / "iflink").read_text()))
    return None


async def _start_proxy(hosts: tuple[str, ...]) -> SharedProxy:
    image = await ensure_egress_image()
    network = await shared_network("public" if hosts == PUBLIC_HOSTS else "allowlist")
    spec = ContainerSpec(
        image=image,
        trial_id="shared-egress",
        network=network.name,
        memory_mb=256,
        pids=256,
        labels={SHARED_LABEL: "proxy"},
        tmpfs={LOG_DIR: f"size={ACCESS_LOG_BYTES}"},
        command=["sh", "-c", START],
        env={"SQUID_CONFIG": squid_config(hosts)},
    )
    try:
        container = await Container.start(spec)
    except DockerError as exc:
        raise EnvironmentSetupError(f"the egress proxy did not start: {exc}") from None
    bound: list[tuple[str, str, str]] = []
    try:
        on = [network]
        if hosts != PUBLIC_HOSTS:  # an allowlist's way out
            on.append(public := await shared_network("public"))
            body = {"Container": container.id}
            await engine().request("POST", f"/networks/{public.name}/connect", body=body)
        for each in on:
            address, port, mac = await bridge_port(container.id, each.name)
            await bind_source(port, address, mac)
            bound.append((port, address, mac))
        await wait_ready(container)
        port, address, _ = bound[0]
        await open_proxy(network.bridge, address, EGRESS_PORT, port)
    except BaseException:
        await _unbind(bound)
        await container.remove()
        raise
    return SharedProxy(hosts, container, network, address, port, bound)


async def _unbind(bound: list[tuple[str, str, str]]) -> None:
    for port, address, mac in bound:
        await unbind_source(port, address, mac)


_PROXY_STARTS: dict[tuple[str, ...], SingleFlight[SharedProxy]] = {}


async def acquire_proxy(hosts: tuple[str, ...]) -> SharedProxy:
    """The proxy for `hosts`, started by the first trial that asks, or again where it stopped (or
    its log grew too long); `release_proxy` hands it back."""
    proxy = _POOL.proxies.get(hosts)
    if proxy is not None and (proxy.retiring or not await _running(proxy)):
        if _POOL.proxies.get(hosts) is proxy:  # not already replaced by a trial that asked meanwhile
            del _POOL.proxies[hosts]
            _POOL.retired.append(proxy)
            await _settle(proxy)
        proxy = _POOL.proxies.get(hosts)
    if proxy is None:
        start = _PROXY_STARTS.setdefault(hosts, SingleFlight(functools.partial(_start_proxy, hosts), "proxy"))
        proxy = await start()
        _POOL.proxies.setdefault(hosts, proxy)
        _close_at_exit_once()
    proxy.users += 1
    return proxy


async def release_proxy(proxy: SharedProxy) -> None:
    proxy.users -= 1
    if proxy.users <= 0:  # no trial can ask about what the proxy did so far
        proxy.ledger.forget_before(time.time())
    await _settle(proxy)


async def _running(proxy: SharedProxy) -> bool:
    try:
        inspected = await engine().json("GET", f"/containers/{proxy.container.id}/json")
    except NotFoundError:
        return False
    return bool((inspected.get("State") or {}).get("Running"))


async def _settle(proxy: SharedProxy) -> None:
    """Remove a replaced proxy once no trial uses it."""
    if proxy in _POOL.retired and proxy.users <= 0:
        _POOL.retired.remove(proxy)
        await _remove_proxy(proxy)


async def _remove_proxy(proxy: SharedProxy) -> None:
    await close_proxy(proxy.network.bridge, proxy.address, EGRESS_PORT, proxy.port)
    await proxy.container.remove()
    await _unbind(proxy.bound)


async def close_shared_egress() -> list[str]:
    """Remove every shared proxy, then the shared networks and their rules; problems, if any.
    Trials still using them lose their proxies: call it when the worker's trials have ended."""
    problems = []
    proxies = [*_POOL.proxies.values(), *_POOL.retired]
    _POOL.proxies.clear()
    _POOL.retired.clear()
    for proxy in proxies:
        try:
            await _remove_proxy(proxy)
        except DockerError as exc:
            problems.append(f"the egress proxy could not be removed: {exc}")
    await close_shared_observer()
    networks = list(_POOL.networks.values())
    _POOL.networks.clear()
    for network in networks:
        try:
            await engine().request("DELETE", f"/networks/{network.name}")
        except NotFoundError:
            pass
        except DockerError as exc:
            problems.append(f"network {network.name} could not be removed: {exc}")
        if network.bridge.startswith(INTERNAL_PREFIX):
            await unseal_bridge(network.bridge)
        await open_ports(network.bridge, network.subnet)
    return problems


def shared_in_use() -> bool:
    """Whether this process holds shared networks, proxies or its DNS observer now."""
    return bool(_POOL.networks or _POOL.proxies or _POOL.retired or observer_in_use())


_AT_EXIT = {"registered": False}


def _close_at_exit_once() -> None:
    if not _AT_EXIT["registered"]:
        _AT_EXIT["registered"] = True
        atexit.register(_close_at_exit, os.getpid())


def _close_at_exit(pid: int) -> None:
    """At the interpreter's exit (not in a forked child): what the worker's own exit did not remove."""
    if os.getpid() != pid or not shared_in_use():
        return
    with contextlib.suppress(Exception):
        asyncio.run(close_shared_egress())
