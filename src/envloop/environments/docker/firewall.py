"""Keeping trial networks away from the host: the rules every trial bridge passes through.

A container on a bridge reaches the host on the bridge's gateway address and on every address of
the host (its packets arrive in the host's INPUT chain), and with masquerading also every private
network the host can route to. A trial with `public` network is to reach the internet and nothing
of the host, so every bridge envloop makes is named with a prefix (`elp…` public, `eli…` internal)
and chains of envloop's own, installed once per host and never per trial, hold for all of them:

- `ENVLOOP-INPUT` (from INPUT, for packets of envloop's bridges): dropped, except a trial's own
  model gateway listener while its agent phase runs (on its internal bridge's address; the
  listener answers that trial's token alone);
- `ENVLOOP-FORWARD` (from Docker's DOCKER-USER, for packets leaving envloop's public bridges):
  every range that is not the internet is dropped (see `forbidden_ranges`: the non-global ranges,
  the networks this host is on and the gateways it routes through, read again whenever a trial
  network is made), except DNS to the host's resolvers (Docker's embedded resolver forwards from the
  container's namespace). An allowlist's or a public phase's proxy sits on the public bridge, so
  what it fetches on a trial's behalf passes the same rules;
- `ENVLOOP-SOURCE` and `ENVLOOP-SHARED` (from DOCKER-USER, before the rest, for packets of every
  envloop bridge), `ENVLOOP-ARP` and `ENVLOOP-MAC` (ebtables): where the rules of a worker's shared
  bridges go, made and removed with them (bridge_rules.py), keeping the trials of a shared bridge
  apart while letting each reach the shared proxies;
- no IPv6 on envloop's bridges (ip6tables, INPUT and FORWARD): their networks are IPv4 alone, but
  the host has a link-local address on each bridge and would answer a container's hand-made IPv6
  (its services, its neighbour discovery and router advertisements) past every rule above.

Needs root, `iptables`, `ip6tables` and `ebtables` (with `ebtables-restore`), and a daemon that
manages its own rules (not `--iptables=false`, which also leaves trials without masquerading);
without them a trial that asks for a network is refused rather than run with the host open.
"""

import asyncio
import os
import shutil

from envloop.core.single_flight import SingleFlight
from envloop.environments.docker import netfilter
from envloop.environments.docker.netfilter import FirewallError
from envloop.environments.forbidden_ranges import NOT_GLOBAL, host_networks, resolvers

PUBLIC_PREFIX = "elp"
INTERNAL_PREFIX = "eli"
INPUT_CHAIN = "ENVLOOP-INPUT"
FORWARD_CHAIN = "ENVLOOP-FORWARD"
SOURCE_CHAIN = "ENVLOOP-SOURCE"
SHARED_CHAIN = "ENVLOOP-SHARED"
ARP_CHAIN = "ENVLOOP-ARP"
"""ebtables' chain (from INPUT and FORWARD, for ARP): on a shared bridge, a bound port claims its own
address alone and an unbound one none, so no trial makes another's (or the host's, or a proxy's)
packets come to it. ebtables here cannot name a bridge (its `--logical-in` needs a kernel module
that may be missing), so a shared bridge's closing rule names its subnet, which no other network of
the daemon has while the bridge is there."""
MAC_CHAIN = "ENVLOOP-MAC"
"""ebtables' chain in its `nat` table (from PREROUTING, before the bridge learns which port a MAC
address is behind): a bound container's MAC address comes from its own port alone, so no trial
makes the bridge send another's frames (the proxy's answers, the internet's) to its port."""

_ready = False
_dropped_host_networks: set[str] = set()
"""The host's networks and gateways this process has made sure are dropped."""


async def ensure_host_guard() -> None:
    """Install the chains once per host (idempotent, shared by every worker process), and drop
    the networks the host is on now (its routes may have changed since)."""
    if not _ready:
        await _install_once()
    for network in await asyncio.to_thread(host_networks):
        if network not in _dropped_host_networks:
            await netfilter.ensure_rule(FORWARD_CHAIN, "-d", network, "-j", "DROP")
            _dropped_host_networks.add(network)


async def _install_guard() -> None:
    """Every step checks before it adds, so another worker process of this host installing the
    chains at the same time adds nothing twice that matters (a duplicated jump is harmless). The
    trials of one process that ask together wait for one install (`_install_once`)."""
    global _ready  # noqa: PLW0603 (installed once per process)
    if _ready:
        return
    if os.geteuid() != 0 or shutil.which("iptables") is None or shutil.which("ebtables") is None:
        raise FirewallError(
            "a trial network needs root, iptables and ebtables here, to keep the trial away from the "
            "host's services and other trials; run the worker as root, or close trial networks "
            "(ENVLOOP_TRIAL_NETWORK=none)"
        )
    if not await netfilter.iptables("-n", "-L", "DOCKER-USER", check=False):
        raise FirewallError(
            "the Docker daemon does not manage iptables (started with --iptables=false), so trial "
            "networks would have no route out and no guard: restart it with scripts/docker-daemon"
        )
    for chain in (INPUT_CHAIN, FORWARD_CHAIN, SOURCE_CHAIN, SHARED_CHAIN):
        await netfilter.ensure_chain(chain)
    # Rules are added when missing, never flushed: another worker process on this host may be
    # using the chains right now.
    for resolver in resolvers():
        for protocol in ("udp", "tcp"):
            await netfilter.ensure_rule(
                FORWARD_CHAIN, "-d", resolver, "-p", protocol, "--dport", "53", "-j", "RETURN"
            )
    for network in NOT_GLOBAL:
        await netfilter.ensure_rule(FORWARD_CHAIN, "-d", network, "-j", "DROP")
    await netfilter.ensure_rule(INPUT_CHAIN, "-j", "DROP")
    for prefix in (PUBLIC_PREFIX, INTERNAL_PREFIX):
        await netfilter.ensure_jump("INPUT", "-i", f"{prefix}+", "-j", INPUT_CHAIN)
    await netfilter.ensure_jump("DOCKER-USER", "-i", f"{PUBLIC_PREFIX}+", "-j", FORWARD_CHAIN)
    # Each inserted first: the source check, then the shared proxies, then ENVLOOP-FORWARD.
    for chain in (SHARED_CHAIN, SOURCE_CHAIN):
        for prefix in (INTERNAL_PREFIX, PUBLIC_PREFIX):
            await netfilter.ensure_jump("DOCKER-USER", "-i", f"{prefix}+", "-j", chain)
    await install_frame_chains()
    await _install_ipv6_guard()
    _ready = True


async def install_frame_chains() -> None:
    """The ebtables chains, and a jump to them: for every ARP frame a bridge port sends to the host
    or another port (`ARP_CHAIN`), and for every frame as it enters the bridge (`MAC_CHAIN`); added
    when missing, never flushed (ebtables has no check of a rule: its listing is read)."""
    await netfilter.ensure_eb_chain(("-t", "filter"), ARP_CHAIN, ("INPUT", "FORWARD"), ("-p", "ARP"))
    await netfilter.ensure_eb_chain(("-t", "nat"), MAC_CHAIN, ("PREROUTING",), ())


async def _install_ipv6_guard() -> None:
    """Drop IPv6 from envloop's bridges, to the host and between their ports: by prefix, so one set
    of rules serves every bridge (none on a host without IPv6)."""
    if not await asyncio.to_thread(os.path.exists, "/proc/net/if_inet6"):
        return
    if shutil.which("ip6tables") is None:
        raise FirewallError("a trial network needs ip6tables here, to keep the host's IPv6 away from trials")
    for chain in ("INPUT", "FORWARD"):
        for prefix in (PUBLIC_PREFIX, INTERNAL_PREFIX):
            rule = ("-i", f"{prefix}+", "-j", "DROP")
            if not await netfilter.ip6tables("-C", chain, *rule, check=False):
                await netfilter.ip6tables("-I", chain, "1", *rule)


_install_once = SingleFlight(_install_guard, "host guard")


def _gateway_rule(bridge: str, address: str, port: int) -> tuple[str, ...]:
    return ("-i", bridge, "-d", address, "-p", "tcp", "--dport", str(port), "-j", "ACCEPT")


async def open_gateway_port(bridge: str, address: str, port: int) -> None:
    """Let the containers on one trial bridge reach a gateway listener on its own address: the rule
    names the bridge, so a later bridge reusing the address or port never inherits it."""
    await ensure_host_guard()
    rule = _gateway_rule(bridge, address, port)
    if not await netfilter.iptables("-C", INPUT_CHAIN, *rule, check=False):
        await netfilter.iptables("-I", INPUT_CHAIN, "1", *rule)


async def close_gateway_port(bridge: str, address: str, port: int) -> None:
    while await netfilter.iptables("-D", INPUT_CHAIN, *_gateway_rule(bridge, address, port), check=False):
        pass
