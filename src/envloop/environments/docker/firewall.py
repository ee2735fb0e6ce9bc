"""Keeping trial networks away from the host: the rules every trial bridge passes through.

A container on a bridge reaches the host on the bridge's gateway address and on every address of
the host (its packets arrive in the host's INPUT chain), and with masquerading also every private
network the host can route to. A trial with `public` network is to reach the internet and nothing
of the host, so every bridge envloop makes is named with a prefix (`elp…` public, `eli…` internal)
and two chains of envloop's own, installed once per host and never per trial, hold for all of them:

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
  envloop bridge) keep the trials of a shared bridge (shared_egress.py) apart while letting each
  reach the shared proxies: a trial container's bridge port passes its own address alone, in IP
  and in ARP (`ENVLOOP-ARP`, ebtables; rules made when it joins and removed when it leaves), and a
  proxy's port is reached, and answers, on
  the proxy's own bridge port alone; everything else between two containers of a shared bridge is
  dropped (on the public bridge by ENVLOOP-FORWARD, its addresses being non-global).

Needs root and `iptables`, and a daemon that manages its own rules (not `--iptables=false`, which
also leaves trials without masquerading); without them a trial that asks for a network is refused
rather than run with the host open.
"""

import asyncio
import os
import shlex
import shutil

from envloop.core.single_flight import SingleFlight
from envloop.environments.base import EnvironmentSetupError
from envloop.environments.docker.orphans import owner_gone, worker_identity
from envloop.environments.forbidden_ranges import NOT_GLOBAL, host_networks, resolvers

PUBLIC_PREFIX = "elp"
INTERNAL_PREFIX = "eli"
INPUT_CHAIN = "ENVLOOP-INPUT"
FORWARD_CHAIN = "ENVLOOP-FORWARD"
SOURCE_CHAIN = "ENVLOOP-SOURCE"
SHARED_CHAIN = "ENVLOOP-SHARED"
ARP_CHAIN = "ENVLOOP-ARP"
"""ebtables' chain (from INPUT and FORWARD, for ARP): a trial container's bridge port claims its own
address alone, so no trial makes another's (or the host's) packets for the proxy or the gateway
come to it."""

_ready = False
_dropped_host_networks: set[str] = set()
"""The host's networks and gateways this process has made sure are dropped."""


class FirewallError(EnvironmentSetupError):
    """The host cannot be kept away from a trial's network here; the reason says why."""


async def _iptables(*args: str, check: bool = True) -> bool:
    proc = await asyncio.create_subprocess_exec(
        "iptables",
        "-w",
        *args,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    if proc.returncode != 0 and check:
        raise FirewallError(f"iptables {' '.join(args)}: {err.decode(errors='replace').strip()[:200]}")
    return proc.returncode == 0


async def _ensure_chain(name: str) -> None:
    """Another worker process of this host may create the chain between the look and the creation:
    only a chain still missing after a failed creation is a failure."""
    if await _iptables("-n", "-L", name, check=False) or await _iptables("-N", name, check=False):
        return
    if not await _iptables("-n", "-L", name, check=False):
        await _iptables("-N", name)  # fails again, with iptables' reason


async def _ensure_jump(chain: str, *rule: str) -> None:
    if not await _iptables("-C", chain, *rule, check=False):
        await _iptables("-I", chain, "1", *rule)


async def ensure_host_guard() -> None:
    """Install the chains once per host (idempotent, shared by every worker process), and drop
    the networks the host is on now (its routes may have changed since)."""
    if not _ready:
        await _install_once()
    for network in await asyncio.to_thread(host_networks):
        if network not in _dropped_host_networks:
            await _ensure_rule(FORWARD_CHAIN, "-d", network, "-j", "DROP")
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
    if not await _iptables("-n", "-L", "DOCKER-USER", check=False):
        raise FirewallError(
            "the Docker daemon does not manage iptables (started with --iptables=false), so trial "
            "networks would have no route out and no guard: restart it with scripts/docker-daemon"
        )
    for chain in (INPUT_CHAIN, FORWARD_CHAIN, SOURCE_CHAIN, SHARED_CHAIN):
        await _ensure_chain(chain)
    # Rules are added when missing, never flushed: another worker process on this host may be
    # using the chains right now.
    for resolver in resolvers():
        for protocol in ("udp", "tcp"):
            await _ensure_rule(FORWARD_CHAIN, "-d", resolver, "-p", protocol, "--dport", "53", "-j", "RETURN")
    for network in NOT_GLOBAL:
        await _ensure_rule(FORWARD_CHAIN, "-d", network, "-j", "DROP")
    await _ensure_rule(INPUT_CHAIN, "-j", "DROP")
    for prefix in (PUBLIC_PREFIX, INTERNAL_PREFIX):
        await _ensure_jump("INPUT", "-i", f"{prefix}+", "-j", INPUT_CHAIN)
    await _ensure_jump("DOCKER-USER", "-i", f"{PUBLIC_PREFIX}+", "-j", FORWARD_CHAIN)
    # Each inserted first: the source check, then the shared proxies, then ENVLOOP-FORWARD.
    for chain in (SHARED_CHAIN, SOURCE_CHAIN):
        for prefix in (INTERNAL_PREFIX, PUBLIC_PREFIX):
            await _ensure_jump("DOCKER-USER", "-i", f"{prefix}+", "-j", chain)
    await _install_arp_chain()
    _ready = True


async def _ebtables(*args: str, check: bool = True) -> tuple[bool, str]:
    """ebtables has no lock (`iptables -w`): two changes at once, in this process or another, can
    fail one of them with an nftables error, so a failed change is tried again a few times."""
    for attempt in range(_EBTABLES_ATTEMPTS):
        proc = await asyncio.create_subprocess_exec(
            "ebtables", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await proc.communicate()
        absent = b"does a matching rule exist" in err  # a rule to delete that is not there
        if proc.returncode == 0 or args[0] == "-L" or absent or attempt == _EBTABLES_ATTEMPTS - 1:
            break
        await asyncio.sleep(0.02 * (attempt + 1))
    if proc.returncode != 0 and check:
        raise FirewallError(f"ebtables {' '.join(args)}: {err.decode(errors='replace').strip()[:200]}")
    return proc.returncode == 0, out.decode(errors="replace")


_EBTABLES_ATTEMPTS = 6


async def _install_arp_chain() -> None:
    """The chain, and a jump to it for every ARP frame a bridge port sends to the host or another
    port; added when missing, never flushed (ebtables has no check of a rule: its listing is read)."""
    if not (await _ebtables("-L", ARP_CHAIN, check=False))[0]:
        made, _ = await _ebtables("-N", ARP_CHAIN, check=False)
        if not made and not (await _ebtables("-L", ARP_CHAIN, check=False))[0]:
            await _ebtables("-N", ARP_CHAIN)  # fails again, with ebtables' reason
    for chain in ("INPUT", "FORWARD"):
        _, listed = await _ebtables("-L", chain)
        if f"-p ARP -j {ARP_CHAIN}" not in listed.splitlines():
            await _ebtables("-I", chain, "1", "-p", "ARP", "-j", ARP_CHAIN)


_install_once = SingleFlight(_install_guard, "host guard")


async def _ensure_rule(chain: str, *rule: str) -> None:
    if not await _iptables("-C", chain, *rule, check=False):
        await _iptables("-A", chain, *rule)


def _gateway_rule(bridge: str, address: str, port: int) -> tuple[str, ...]:
    return ("-i", bridge, "-d", address, "-p", "tcp", "--dport", str(port), "-j", "ACCEPT")


async def open_gateway_port(bridge: str, address: str, port: int) -> None:
    """Let the containers on one trial bridge reach a gateway listener on its own address: the rule
    names the bridge, so a later bridge reusing the address or port never inherits it."""
    await ensure_host_guard()
    rule = _gateway_rule(bridge, address, port)
    if not await _iptables("-C", INPUT_CHAIN, *rule, check=False):
        await _iptables("-I", INPUT_CHAIN, "1", *rule)


async def close_gateway_port(bridge: str, address: str, port: int) -> None:
    while await _iptables("-D", INPUT_CHAIN, *_gateway_rule(bridge, address, port), check=False):
        pass


def _owned() -> tuple[str, ...]:
    """The comment that names this worker on each rule it makes for a shared bridge, so a killed
    worker's rules are swept (`sweep_rules`)."""
    return ("-m", "comment", "--comment", f"{_OWNER_MARK}{worker_identity()}")


_OWNER_MARK = "envloop "


def _source_rule(port: str, address: str) -> tuple[str, ...]:
    return ("-m", "physdev", "--physdev-in", port, "!", "-s", address, *_owned(), "-j", "DROP")


def _proxy_rules(bridge: str, address: str, port: int, proxy_port: str) -> list[tuple[str, ...]]:
    tcp = ("-p", "tcp")
    return [
        ("-o", bridge, "-d", address, *tcp, "--dport", str(port), "-m", "physdev", "--physdev-out",
         proxy_port, *_owned(), "-j", "ACCEPT"),
        ("-i", bridge, "-s", address, *tcp, "--sport", str(port), "-m", "physdev", "--physdev-in",
         proxy_port, "-m", "conntrack", "--ctstate", "ESTABLISHED", *_owned(), "-j", "ACCEPT"),
    ]  # fmt: skip


def _arp_rule(port: str, address: str) -> tuple[str, ...]:
    return ("-i", port, "-p", "ARP", "--arp-ip-src", "!", address, "-j", "DROP")


async def bind_source(port: str, address: str) -> None:
    """From now on, what arrives from the bridge port `port` (a trial container's, joining a shared
    bridge once) is dropped unless it comes from `address`, the container's own: IP packets, and
    ARP that would claim another address for it."""
    await asyncio.gather(
        _iptables("-I", SOURCE_CHAIN, "1", *_source_rule(port, address)),
        _ebtables("-A", ARP_CHAIN, *_arp_rule(port, address)),
    )


async def unbind_source(port: str, address: str) -> None:
    """Remove what `bind_source` made (once: it made one rule of each)."""
    await asyncio.gather(
        _iptables("-D", SOURCE_CHAIN, *_source_rule(port, address), check=False),
        _ebtables("-D", ARP_CHAIN, *_arp_rule(port, address), check=False),
    )


async def open_proxy(bridge: str, address: str, port: int, proxy_port: str) -> None:
    """Let the containers of a shared bridge reach a proxy listening at `address`:`port`, and its
    answers reach them, through the proxy's own bridge port (`proxy_port`) alone."""
    await ensure_host_guard()
    for rule in _proxy_rules(bridge, address, port, proxy_port):
        if not await _iptables("-C", SHARED_CHAIN, *rule, check=False):
            await _iptables("-I", SHARED_CHAIN, "1", *rule)


async def close_proxy(bridge: str, address: str, port: int, proxy_port: str) -> None:
    for rule in _proxy_rules(bridge, address, port, proxy_port):
        while await _iptables("-D", SHARED_CHAIN, *rule, check=False):
            pass


async def seal_bridge(bridge: str) -> None:
    """Drop whatever else moves between the containers of a shared internal bridge (past its
    proxies), whatever Docker's own rules for it say."""
    await ensure_host_guard()
    await _ensure_rule(SHARED_CHAIN, "-i", bridge, *_owned(), "-j", "DROP")


async def unseal_bridge(bridge: str) -> None:
    while await _iptables("-D", SHARED_CHAIN, "-i", bridge, *_owned(), "-j", "DROP", check=False):
        pass


async def sweep_rules() -> int:
    """Remove the shared-bridge rules of workers of this host that are gone; how many."""
    if os.geteuid() != 0 or shutil.which("iptables") is None:
        return 0
    removed = 0
    for chain in (SOURCE_CHAIN, SHARED_CHAIN):
        proc = await asyncio.create_subprocess_exec(
            "iptables", "-w", "-S", chain, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
        )
        listed, _ = await proc.communicate()
        for line in listed.decode(errors="replace").splitlines():
            words = shlex.split(line)
            if words[:2] != ["-A", chain] or "--comment" not in words:
                continue
            comment = words[words.index("--comment") + 1]
            if comment.startswith(_OWNER_MARK) and owner_gone(comment.removeprefix(_OWNER_MARK)):
                removed += await _iptables("-D", *words[1:], check=False)
    return removed + await _sweep_arp_rules()


async def _sweep_arp_rules() -> int:
    """Remove the ARP rules of bridge ports that are gone (their containers were; a later port of
    the same name must not inherit them)."""
    listed, text = await _ebtables("-L", ARP_CHAIN, check=False)
    removed = 0
    for line in text.splitlines() if listed else []:
        words = shlex.split(line)
        if "-i" not in words:
            continue
        port = words[words.index("-i") + 1]
        if not await asyncio.to_thread(os.path.exists, f"/sys/class/net/{port}"):
            removed += (await _ebtables("-D", ARP_CHAIN, *words, check=False))[0]
    return removed


def _observer_rules(bridge: str, address: str, port: int) -> list[tuple[str, ...]]:
    return [
        ("-i", bridge, "-d", address, "-p", protocol, "--dport", str(port), *_owned(), "-j", "ACCEPT")
        for protocol in ("udp", "tcp")
    ]


async def open_observer(bridge: str, address: str, port: int) -> None:
    """Let the containers of the shared public bridge reach the worker's DNS observer
    (dns_observer.py) at the bridge's gateway `address`:`port`, and nothing else of the host."""
    await ensure_host_guard()
    for rule in _observer_rules(bridge, address, port):
        if not await _iptables("-C", INPUT_CHAIN, *rule, check=False):
            await _iptables("-I", INPUT_CHAIN, "1", *rule)


async def close_observer(bridge: str, address: str, port: int) -> None:
    for rule in _observer_rules(bridge, address, port):
        while await _iptables("-D", INPUT_CHAIN, *rule, check=False):
            pass


async def sweep_observer_rules() -> int:
    """Remove the DNS observer rules of workers of this host that are gone; how many."""
    if os.geteuid() != 0 or shutil.which("iptables") is None:
        return 0
    proc = await asyncio.create_subprocess_exec(
        "iptables", "-w", "-S", INPUT_CHAIN, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    listed, _ = await proc.communicate()
    removed = 0
    for line in listed.decode(errors="replace").splitlines():
        words = shlex.split(line)
        if words[:2] != ["-A", INPUT_CHAIN] or "--comment" not in words:
            continue
        comment = words[words.index("--comment") + 1]
        if comment.startswith(_OWNER_MARK) and owner_gone(comment.removeprefix(_OWNER_MARK)):
            removed += await _iptables("-D", *words[1:], check=False)
    return removed
