"""The IPv4 destinations a `public` trial never reaches: what is not the internet, seen from this host.

Two kinds:

- every range IANA marks as not globally reachable (private, shared, loopback, link-local, this
  network, protocol assignments, the 6to4 relay, benchmarking `198.18.0.0/15`, multicast and the
  reserved `240.0.0.0/4` with the broadcast address), fixed;
- the networks this host is on (its on-link routes: the LAN around it, its neighbours), every
  gateway its routes name and the host's own addresses, read from the routing table, since a LAN
  or a router may well use global addresses.

Used by both environments: for packets leaving the docker environment's public bridges
(`docker/firewall.py`; there the host's own addresses are local destinations, dropped on input
anyway), and for the connections pasta makes on a local `public` trial's behalf (`public_egress`).

The three documentation ranges (`192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`) are not globally
reachable either, but no router on the internet carries them, so they only ever lead to a network
someone set up with them; machines that stand in for the internet with them (this project's test
machines resolve package registries there) would lose it. They are dropped where this host is on
them or routes through them (on-link and gateway rules), and otherwise left to the default route.
"""

import ipaddress
import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

NOT_GLOBAL = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
)
"""IANA's special-purpose ranges that are not globally reachable, documentation ranges aside."""
NOT_GLOBAL_V6 = (
    "::/128",
    "::ffff:0:0/96",
    "64:ff9b:1::/48",
    "100::/64",
    "2001:db8::/32",
    "fc00::/7",
    "fe80::/10",
    "ff00::/8",
)
"""The same of IPv6 (unspecified, IPv4-mapped, local translation, discard, documentation, unique
local, link-local, multicast); loopback is the caller's to handle. Docker trial networks have no
IPv6; pasta gives local trials the host's."""

_OWN_BRIDGES = ("elp", "eli", "docker", "br-", "veth")
"""Interfaces whose routes lead to containers, not to the host's surroundings."""
_ROUTE_TIMEOUT_SEC = 10.0
_ROUTING_STATE = {4: ("/proc/net/fib_trie", "/proc/net/route"), 6: ("/proc/net/ipv6_route",)}
"""The kernel's own views of the routing tables: every IPv4 table's prefixes and the host's
addresses, the main table's gateways, every IPv6 route with its next hop."""
_RECHECK_SEC = 5.0
"""The longest a reading of `ip route` is used while those views stay the same: a gateway changed
in an IPv4 policy-routing table other than the main one, on the same prefixes, shows in none."""
RESOLV_CONF = Path("/etc/resolv.conf")


def _covered(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    if isinstance(network, ipaddress.IPv4Network):
        return any(network.subnet_of(ipaddress.IPv4Network(fixed)) for fixed in NOT_GLOBAL)
    return network.is_loopback or any(
        network.subnet_of(ipaddress.IPv6Network(fixed)) for fixed in NOT_GLOBAL_V6
    )


@dataclass(frozen=True)
class _Reading:
    state: bytes
    at: float
    networks: tuple[str, ...]


_readings: dict[int, _Reading] = {}


def _routing_state(version: int) -> bytes | None:
    try:
        return b"\0".join(Path(path).read_bytes() for path in _ROUTING_STATE[version])
    except OSError:
        return None


def host_networks(version: int = 4) -> list[str]:
    """The networks this host is on, the gateways it routes through and its own addresses (of IP
    `version`), as CIDRs, leaving out what the fixed ranges already cover and the routes of
    container bridges; empty when the routing table cannot be read (the fixed ranges still hold).

    Asked for every new trial network, so `ip route` (milliseconds of fork and exec, where reading
    /proc takes microseconds) runs again only when the kernel's routing views changed or the last
    reading is `_RECHECK_SEC` old."""
    state, now = _routing_state(version), time.monotonic()
    last = _readings.get(version)
    if state is not None and last is not None and last.state == state and now - last.at < _RECHECK_SEC:
        return list(last.networks)
    networks = _read_host_networks(version)
    if state is not None:
        _readings[version] = _Reading(state, now, tuple(networks))
    return networks


def _read_host_networks(version: int) -> list[str]:
    try:
        done = subprocess.run(
            ["ip", "-j", f"-{version}", "route", "show", "table", "all"],
            capture_output=True,
            check=False,
            timeout=_ROUTE_TIMEOUT_SEC,
        )
        routes = json.loads(done.stdout or b"[]") if done.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return []
    found: list[str] = []
    for route in routes if isinstance(routes, list) else []:
        kind = route.get("type", "unicast") if isinstance(route, dict) else None
        if kind not in ("unicast", "local"):
            continue  # broadcasts and the like
        if str(route.get("dev", "")).startswith(_OWN_BRIDGES):
            continue
        candidates = []
        if route.get("gateway"):
            candidates.append(f"{route['gateway']}/{32 if version == 4 else 128}")
        # On-link: no gateway to go through (IPv6 routes do not say their scope).
        on_link = kind == "local" or not route.get("gateway")
        if on_link and route.get("dst") not in (None, "default"):
            candidates.append(str(route["dst"]))
        for candidate in candidates:
            try:
                network = ipaddress.ip_network(candidate, strict=False)
            except ValueError:
                continue
            if network.version != version:
                continue
            if network.prefixlen > 0 and not _covered(network) and str(network) not in found:
                found.append(str(network))
    return found


def resolvers(version: int = 4, loopback: bool = False) -> list[str]:
    """The host's resolvers of IP `version` (the only non-global addresses a public trial
    reaches, on port 53); those on loopback too with `loopback` (for what runs on the host itself)."""
    found = []
    try:
        lines = RESOLV_CONF.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            try:
                address = ipaddress.ip_address(words[1])
            except ValueError:
                continue
            if address.version == version and (loopback or not address.is_loopback):
                found.append(str(address))
    return found
