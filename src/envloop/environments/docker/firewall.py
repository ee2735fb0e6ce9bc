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
  reach the shared proxies. A shared bridge's ports are closed until bound: its last rule in
  ENVLOOP-SOURCE drops whatever comes from the bridge, and in `ENVLOOP-ARP` (ebtables) whatever ARP
  claims an address of its subnet, and a port is let through, ahead of those, by a rule of its own
  once bound to its container's address (`bind_source`: the proxies' ports when they start, a trial
  container's when it joins, removed when it leaves); a bound container's MAC address is, from then
  on, taken from its own port alone (`ENVLOOP-MAC`), so no other port makes the bridge send it that
  container's frames. A task image's entrypoint, running from the container's start, can neither
  claim another's address (in IP or ARP) nor send anything at all before its port is bound: its
  first packets wait to be sent again. A proxy's port is reached, and answers, on the proxy's own
  bridge port alone; everything else between two containers of a shared bridge is dropped (on the
  public bridge by ENVLOOP-FORWARD, its addresses being non-global);
- no IPv6 on envloop's bridges (ip6tables, INPUT and FORWARD): their networks are IPv4 alone, but
  the host has a link-local address on each bridge and would answer a container's hand-made IPv6
  (its services, its neighbour discovery and router advertisements) past every rule above.

Needs root, `iptables`, `ip6tables` and `ebtables` (with `ebtables-restore`), and a daemon that
manages its own rules (not `--iptables=false`, which also leaves trials without masquerading);
without them a trial that asks for a network is refused rather than run with the host open.
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


class FirewallError(EnvironmentSetupError):
    """The host cannot be kept away from a trial's network here; the reason says why."""


async def _iptables(*args: str, check: bool = True) -> bool:
    return await _xtables("iptables", args, check)


async def _ip6tables(*args: str, check: bool = True) -> bool:
    return await _xtables("ip6tables", args, check)


async def _xtables(binary: str, args: tuple[str, ...], check: bool) -> bool:
    proc = await asyncio.create_subprocess_exec(
        binary,
        "-w",
        *args,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    if proc.returncode != 0 and check:
        raise FirewallError(f"{binary} {' '.join(args)}: {err.decode(errors='replace').strip()[:200]}")
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
    await _install_ipv6_guard()
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
        if proc.returncode == 0 or "-L" in args[:3] or absent or attempt == _EBTABLES_ATTEMPTS - 1:
            break
        await asyncio.sleep(0.02 * (attempt + 1))
    if proc.returncode != 0 and check:
        raise FirewallError(f"ebtables {' '.join(args)}: {err.decode(errors='replace').strip()[:200]}")
    return proc.returncode == 0, out.decode(errors="replace")


_EBTABLES_ATTEMPTS = 6


async def _ebtables_batch(changes: dict[str, tuple[str, ...]], attempts: int = _EBTABLES_ATTEMPTS) -> bool:
    """Make one change in each of several tables (`filter`, `nat`) in one ebtables process, one
    transaction: two ebtables at once, each taking its own, collide and wait on each other for
    twice the time. False when it could not (a change to delete that is not there fails them all)."""
    text = "".join(f"*{table}\n{' '.join(change)}\n" for table, change in changes.items()) + "COMMIT\n"
    for attempt in range(attempts):
        try:
            proc = await asyncio.create_subprocess_exec(
                "ebtables-restore",
                "--noflush",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
        except OSError:
            return False
        await proc.communicate(text.encode())
        if proc.returncode == 0:
            return True
        await asyncio.sleep(0.02 * (attempt + 1))
    return False


async def _install_arp_chain() -> None:
    """The chains, and a jump to them: for every ARP frame a bridge port sends to the host or
    another port, and for every frame as it enters the bridge (`MAC_CHAIN`); added when missing,
    never flushed (ebtables has no check of a rule: its listing is read)."""
    await _ensure_eb_chain(("-t", "filter"), ARP_CHAIN, ("INPUT", "FORWARD"), ("-p", "ARP"))
    await _ensure_eb_chain(("-t", "nat"), MAC_CHAIN, ("PREROUTING",), ())


async def _ensure_eb_chain(
    table: tuple[str, ...], name: str, jumps: tuple[str, ...], match: tuple[str, ...]
) -> None:
    if not (await _ebtables(*table, "-L", name, check=False))[0]:
        made, _ = await _ebtables(*table, "-N", name, check=False)
        if not made and not (await _ebtables(*table, "-L", name, check=False))[0]:
            await _ebtables(*table, "-N", name)  # fails again, with ebtables' reason
    for chain in jumps:
        _, listed = await _ebtables(*table, "-L", chain)
        if " ".join([*match, "-j", name]) not in listed.splitlines():
            await _ebtables(*table, "-I", chain, "1", *match, "-j", name)


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
            if not await _ip6tables("-C", chain, *rule, check=False):
                await _ip6tables("-I", chain, "1", *rule)


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
    return ("-m", "physdev", "--physdev-in", port, "-s", address, *_owned(), "-j", "RETURN")


def _proxy_rules(bridge: str, address: str, port: int, proxy_port: str) -> list[tuple[str, ...]]:
    tcp = ("-p", "tcp")
    return [
        ("-o", bridge, "-d", address, *tcp, "--dport", str(port), "-m", "physdev", "--physdev-out",
         proxy_port, *_owned(), "-j", "ACCEPT"),
        ("-i", bridge, "-s", address, *tcp, "--sport", str(port), "-m", "physdev", "--physdev-in",
         proxy_port, "-m", "conntrack", "--ctstate", "ESTABLISHED", *_owned(), "-j", "ACCEPT"),
    ]  # fmt: skip


def _arp_rule(port: str, address: str) -> tuple[str, ...]:
    return ("-i", port, "-p", "ARP", "--arp-ip-src", address, "-j", "RETURN")


def _mac_rule(port: str, mac: str) -> tuple[str, ...]:
    return ("-s", mac, "!", "-i", port, "-j", "DROP")


def _closed_bridge_rule(bridge: str) -> tuple[str, ...]:
    return ("-i", bridge, *_owned(), "-j", "DROP")


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
    await _ensure_rule(SOURCE_CHAIN, *_closed_bridge_rule(bridge))
    await _ebtables("-A", ARP_CHAIN, *_closed_subnet_rule(subnet))


async def open_ports(bridge: str, subnet: str) -> None:
    """Remove what `close_ports` made (the bridge is gone, or going): its copy of the ARP rule alone."""
    while await _iptables("-D", SOURCE_CHAIN, *_closed_bridge_rule(bridge), check=False):
        pass
    await _ebtables("-D", ARP_CHAIN, *_closed_subnet_rule(subnet), check=False)


async def bind_source(port: str, address: str, mac: str) -> None:
    """Let through what arrives from the bridge port `port` of a shared bridge (a container's,
    joining the bridge once) when it comes from `address`, the container's own: IP packets, and
    ARP claiming that address. Before, nothing from the port passed (`close_ports`); after, anything
    else from it still does not. And from now on its MAC address `mac` is taken from no other port."""
    await asyncio.gather(
        _iptables("-I", SOURCE_CHAIN, "1", *_source_rule(port, address)),
        _bind_frames(port, address, mac),
    )


async def _bind_frames(port: str, address: str, mac: str) -> None:
    arp, owned = (
        ("-I", ARP_CHAIN, "1", *_arp_rule(port, address)),
        ("-I", MAC_CHAIN, "1", *_mac_rule(port, mac)),
    )
    if not await _ebtables_batch({"filter": arp, "nat": owned}):
        await _ebtables(*arp)  # one at a time, failing with ebtables' reason
        await _ebtables("-t", "nat", *owned)


async def unbind_source(port: str, address: str, mac: str) -> None:
    """Remove what `bind_source` made (once: it made one rule of each)."""
    await asyncio.gather(
        _iptables("-D", SOURCE_CHAIN, *_source_rule(port, address), check=False),
        _unbind_frames(port, address, mac),
    )


async def _unbind_frames(port: str, address: str, mac: str) -> None:
    arp, owned = ("-D", ARP_CHAIN, *_arp_rule(port, address)), ("-D", MAC_CHAIN, *_mac_rule(port, mac))
    if not await _ebtables_batch({"filter": arp, "nat": owned}, attempts=1):
        await _ebtables(*arp, check=False)  # one of them was gone already (swept), or a collision
        await _ebtables("-t", "nat", *owned, check=False)


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
    listed, text = await _ebtables("-t", table, "-L", chain, check=False)
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
            removed += (await _ebtables("-t", table, "-D", chain, *words, check=False))[0]
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
