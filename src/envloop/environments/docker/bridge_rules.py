"""The rules of a worker's shared bridges (shared_egress.py): trials on one bridge kept apart, each
reaching the shared proxies, and a killed worker's rules swept.

In the chains firewall.py installs once per host (`ENVLOOP-SOURCE` and `ENVLOOP-SHARED` from
DOCKER-USER, before the rest; `ENVLOOP-ARP` and `ENVLOOP-MAC` in ebtables):

- a shared bridge's ports are closed until bound: its last rule in ENVLOOP-SOURCE drops whatever
  comes from the bridge, and in ENVLOOP-ARP whatever ARP claims an address of its subnet
  (`close_ports`); a port is let through, ahead of those, by a rule of its own once bound to its
  container's address (`bind_source`: the proxies' ports when they start, a trial container's when
  it joins, removed when it leaves);
- a bound container's MAC address is, from then on, taken from its own port alone (ENVLOOP-MAC), so
  no other port makes the bridge send it that container's frames;
- a proxy's port is reached, and answers, on the proxy's own bridge port alone (`open_proxy`);
- the shared public bridge reaches the worker's DNS observer (dns_observer.py) on its gateway
  address, port 53, and nothing else of the host (`open_observer`, in ENVLOOP-INPUT);
  everything else between two containers of a shared internal bridge is dropped (`seal_bridge`; on
  the public bridge ENVLOOP-FORWARD drops it, its addresses being non-global).

So a task image's entrypoint, running from the container's start, can neither claim another's
address (in IP or ARP) nor send anything at all before its port is bound: its first packets wait to
be sent again.

Each rule names this worker (`netfilter.owned`, or a port or subnet of its own), so `sweep_rules`
removes those of workers that are gone.
"""

import asyncio
import contextlib
import fcntl
import ipaddress
import os
import shlex
import shutil
import socket
import struct
from pathlib import Path

from envloop.environments.docker import netfilter
from envloop.environments.docker.firewall import (
    ARP_CHAIN,
    INPUT_CHAIN,
    INTERNAL_PREFIX,
    MAC_CHAIN,
    PUBLIC_PREFIX,
    SHARED_CHAIN,
    SOURCE_CHAIN,
    ensure_host_guard,
)
from envloop.liveness import identity_gone


def _source_rule(port: str, address: str) -> tuple[str, ...]:
    return ("-m", "physdev", "--physdev-in", port, "-s", address, *netfilter.owned(), "-j", "RETURN")


def _proxy_rules(bridge: str, address: str, port: int, proxy_port: str) -> list[tuple[str, ...]]:
    tcp = ("-p", "tcp")
    return [
        ("-o", bridge, "-d", address, *tcp, "--dport", str(port), "-m", "physdev", "--physdev-out",
         proxy_port, *netfilter.owned(), "-j", "ACCEPT"),
        ("-i", bridge, "-s", address, *tcp, "--sport", str(port), "-m", "physdev", "--physdev-in",
         proxy_port, "-m", "conntrack", "--ctstate", "ESTABLISHED", *netfilter.owned(), "-j", "ACCEPT"),
    ]  # fmt: skip


def _arp_rule(port: str, address: str) -> tuple[str, ...]:
    return ("-i", port, "-p", "ARP", "--arp-ip-src", address, "-j", "RETURN")


def _mac_rule(port: str, mac: str) -> tuple[str, ...]:
    return ("-s", mac, "!", "-i", port, "-j", "DROP")


def _closed_bridge_rule(bridge: str) -> tuple[str, ...]:
    return ("-i", bridge, *netfilter.owned(), "-j", "DROP")


def _closed_subnet_rule(subnet: str) -> tuple[str, ...]:
    return ("-p", "ARP", "--arp-ip-src", subnet, "-j", "DROP")


async def close_ports(bridge: str, subnet: str) -> None:
    """Drop whatever comes from a port of the shared `bridge` (of `subnet`) that is not bound: IP
    packets, and ARP claiming an address of the subnet. Appended, so that every port's own rule
    (`bind_source`, inserted first) comes before; made once per bridge, before any container is on it.

    The ARP rule names the subnet, which the daemon hands to a later network once this one is gone:
    a worker whose bridge has just got it may have added the same rule before this one removes its
    own, so each adds a copy of its own (no look first) and removes one (`open_ports`)."""
    await ensure_host_guard()
    await netfilter.ensure_rule(SOURCE_CHAIN, *_closed_bridge_rule(bridge))
    await netfilter.ebtables("-A", ARP_CHAIN, *_closed_subnet_rule(subnet))


async def open_ports(bridge: str, subnet: str) -> None:
    """Remove what `close_ports` made (the bridge is gone, or going): its copy of the ARP rule alone."""
    while await netfilter.iptables("-D", SOURCE_CHAIN, *_closed_bridge_rule(bridge), check=False):
        pass
    await netfilter.ebtables("-D", ARP_CHAIN, *_closed_subnet_rule(subnet), check=False)


async def bind_source(port: str, address: str, mac: str) -> None:
    """Let through what arrives from the bridge port `port` of a shared bridge (a container's,
    joining the bridge once) when it comes from `address`, the container's own: IP packets, and
    ARP claiming that address. Before, nothing from the port passed (`close_ports`); after, anything
    else from it still does not. And from now on its MAC address `mac` is taken from no other port."""
    await asyncio.gather(
        netfilter.iptables("-I", SOURCE_CHAIN, "1", *_source_rule(port, address)),
        _bind_frames(port, address, mac),
    )


async def _bind_frames(port: str, address: str, mac: str) -> None:
    arp, owned = (
        ("-I", ARP_CHAIN, "1", *_arp_rule(port, address)),
        ("-I", MAC_CHAIN, "1", *_mac_rule(port, mac)),
    )
    if not await netfilter.ebtables_batch({"filter": arp, "nat": owned}):
        await netfilter.ebtables(*arp)  # one at a time, failing with ebtables' reason
        await netfilter.ebtables("-t", "nat", *owned)


async def unbind_source(port: str, address: str, mac: str) -> None:
    """Remove what `bind_source` made (once: it made one rule of each)."""
    await asyncio.gather(
        netfilter.iptables("-D", SOURCE_CHAIN, *_source_rule(port, address), check=False),
        _unbind_frames(port, address, mac),
    )


async def _unbind_frames(port: str, address: str, mac: str) -> None:
    arp, owned = ("-D", ARP_CHAIN, *_arp_rule(port, address)), ("-D", MAC_CHAIN, *_mac_rule(port, mac))
    if not await netfilter.ebtables_batch({"filter": arp, "nat": owned}, attempts=1):
        await netfilter.ebtables(*arp, check=False)  # one of them was gone already (swept), or a collision
        await netfilter.ebtables("-t", "nat", *owned, check=False)


async def open_proxy(bridge: str, address: str, port: int, proxy_port: str) -> None:
    """Let the containers of a shared bridge reach a proxy listening at `address`:`port`, and its
    answers reach them, through the proxy's own bridge port (`proxy_port`) alone."""
    await ensure_host_guard()
    for rule in _proxy_rules(bridge, address, port, proxy_port):
        if not await netfilter.iptables("-C", SHARED_CHAIN, *rule, check=False):
            await netfilter.iptables("-I", SHARED_CHAIN, "1", *rule)


async def close_proxy(bridge: str, address: str, port: int, proxy_port: str) -> None:
    for rule in _proxy_rules(bridge, address, port, proxy_port):
        while await netfilter.iptables("-D", SHARED_CHAIN, *rule, check=False):
            pass


async def seal_bridge(bridge: str) -> None:
    """Drop whatever else moves between the containers of a shared internal bridge (past its
    proxies), whatever Docker's own rules for it say."""
    await ensure_host_guard()
    await netfilter.ensure_rule(SHARED_CHAIN, "-i", bridge, *netfilter.owned(), "-j", "DROP")


async def unseal_bridge(bridge: str) -> None:
    while await netfilter.iptables(
        "-D", SHARED_CHAIN, "-i", bridge, *netfilter.owned(), "-j", "DROP", check=False
    ):
        pass


def _observer_rules(bridge: str, address: str, port: int) -> list[tuple[str, ...]]:
    reach = ("-i", bridge, "-d", address)
    return [
        (*reach, "-p", protocol, "--dport", str(port), *netfilter.owned(), "-j", "ACCEPT")
        for protocol in ("udp", "tcp")
    ]


async def open_observer(bridge: str, address: str, port: int) -> None:
    """Let the containers of the shared public bridge reach the worker's DNS observer
    (dns_observer.py) at the bridge's gateway `address`:`port`, and nothing else of the host."""
    await ensure_host_guard()
    for rule in _observer_rules(bridge, address, port):
        if not await netfilter.iptables("-C", INPUT_CHAIN, *rule, check=False):
            await netfilter.iptables("-I", INPUT_CHAIN, "1", *rule)


async def close_observer(bridge: str, address: str, port: int) -> None:
    for rule in _observer_rules(bridge, address, port):
        while await netfilter.iptables("-D", INPUT_CHAIN, *rule, check=False):
            pass


async def sweep_rules() -> int:
    """Remove the shared-bridge rules of workers of this host that are gone (their DNS observer's
    among them); how many."""
    if os.geteuid() != 0 or shutil.which("iptables") is None:
        return 0
    removed = 0
    for chain in (SOURCE_CHAIN, SHARED_CHAIN, INPUT_CHAIN):
        for line in await netfilter.listed(chain):
            words = shlex.split(line)
            if words[:2] != ["-A", chain] or "--comment" not in words:
                continue
            comment = words[words.index("--comment") + 1]
            if comment.startswith(netfilter.OWNER_MARK) and identity_gone(
                comment.removeprefix(netfilter.OWNER_MARK)
            ):
                removed += await netfilter.iptables("-D", *words[1:], check=False)
    return removed + await _sweep_arp_rules()


async def _sweep_arp_rules() -> int:
    """Remove the ARP and MAC rules of bridge ports that are gone (their containers were; a later
    port of the same name must not inherit them), and the closing rules of subnets no envloop bridge
    of this host has any more (a killed worker's: a later network of the same subnet must not
    inherit them)."""
    subnets = await asyncio.to_thread(_bridge_subnets)
    removed = 0
    for table, chain in (("filter", ARP_CHAIN), ("nat", MAC_CHAIN)):
        removed += await _sweep_eb_chain(table, chain, subnets)
    return removed


async def _sweep_eb_chain(table: str, chain: str, subnets: set[ipaddress.IPv4Network]) -> int:
    listed, text = await netfilter.ebtables("-t", table, "-L", chain, check=False)
    removed = 0
    for line in text.splitlines() if listed else []:
        words = shlex.split(line)
        if "-i" in words:
            port = next(word for word in words[words.index("-i") + 1 :] if word != "!")
            gone = not await asyncio.to_thread(os.path.exists, f"/sys/class/net/{port}")
        elif (subnet := _closed_subnet(words)) is not None:
            gone = subnet not in subnets
        else:
            continue
        if gone:
            removed += (await netfilter.ebtables("-t", table, "-D", chain, *words, check=False))[0]
    return removed


def _closed_subnet(words: list[str]) -> ipaddress.IPv4Network | None:
    """The subnet a listed rule of the chain closes, when it is one of `close_ports`."""
    if len(words) == 6 and words == list(_closed_subnet_rule(words[3])):
        with contextlib.suppress(ValueError):
            return ipaddress.IPv4Network(words[3], strict=False)
    return None


def _bridge_subnets() -> set[ipaddress.IPv4Network]:
    """The subnets of the envloop bridges on this host now (their addresses, read from the kernel)."""
    found = set()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for interface in Path("/sys/class/net").iterdir():
            if not interface.name.startswith((PUBLIC_PREFIX, INTERNAL_PREFIX)):
                continue
            with contextlib.suppress(OSError):
                request = struct.pack("256s", interface.name.encode()[:15])
                address = socket.inet_ntoa(fcntl.ioctl(probe, _SIOCGIFADDR, request)[20:24])
                mask = socket.inet_ntoa(fcntl.ioctl(probe, _SIOCGIFNETMASK, request)[20:24])
                found.add(ipaddress.IPv4Network(f"{address}/{mask}", strict=False))
    return found


_SIOCGIFADDR = 0x8915
_SIOCGIFNETMASK = 0x891B
