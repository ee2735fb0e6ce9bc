"""The names a public trial looks up itself, ignoring the proxy, on its record: through the worker's
DNS observer on the shared public bridge, against the real daemon.

This machine has no internet, so the observer forwards to a resolver of the test's own on loopback
(ENVLOOP_DNS_UPSTREAM, tests/dns_upstream.py), which knows one name and says every other does not
exist.
"""

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envloop.core.trial import TrialOutcome
from envloop.environments.docker.bridge_rules import sweep_rules
from envloop.environments.docker.cli import docker_binary
from envloop.environments.docker.firewall import INPUT_CHAIN
from envloop.environments.docker.images import BuildRecords
from envloop.environments.docker.orphans import sweep_orphans
from envloop.environments.docker.provider import DockerEnvironmentProvider
from envloop.environments.docker.shared_egress import shared_network
from envloop.runners import ShellRunner
from envloop.tasks.harbor import load_harbor_task
from tests.dns_upstream import FAILING, StubResolver, stub_resolver
from tests.docker_daemon import command_running, docker_daemon
from tests.public_trial_support import command, labelled, leftovers, run_worker, spec_for, write_task
from tests.registries import registry_url

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon"]

KNOWN = "files.envloop-dns.zz"
LOOK_UP = (
    "import socket, sys\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        print(name, socket.getaddrinfo(name, 80, socket.AF_INET)[0][4][0])\n"
    "    except OSError as exc:\n"
    "        print(name, type(exc).__name__)\n"
)


@pytest.fixture
def upstream(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubResolver]:
    with stub_resolver({KNOWN: "198.51.100.7", "a.envloop-dns.zz": "198.51.100.8"}) as stub:
        monkeypatch.setenv("ENVLOOP_DNS_UPSTREAM", stub.upstream)
        yield stub


def task_with_lookup(root: Path, note: str = "") -> Path:
    task = write_task(root, note=note)
    (task / "environment" / "look_up.py").write_text(LOOK_UP)
    (task / "environment" / "Dockerfile").write_text(
        "FROM python:3.11-slim\nCOPY fetch.py look_up.py /\nWORKDIR /app\n"
    )
    return task


def looked_up(outcome: TrialOutcome) -> list[tuple[str, dict[str, int]]]:
    assert outcome.destinations is not None
    return [
        (one.label(), {str(result): count for result, count in one.results.items()})
        for one in outcome.destinations.listed
    ]


@pytest.mark.usefixtures("upstream")
def test_a_name_a_public_trial_resolves_directly_is_on_its_record_with_its_result(tmp_path: Path) -> None:
    task = task_with_lookup(tmp_path / "task")
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    # Python's resolver, and glibc's getaddrinfo for IPv4 and IPv6 at once (`getent ahosts`), get
    # answers from the plain queries the observer forwards in place of theirs.
    agent = (
        f"python3 /look_up.py {KNOWN} nowhere.envloop-dns.zz > /logs/agent/python.txt; "
        f"getent ahosts {KNOWN} > /logs/agent/getent.txt"
    )
    spec = spec_for(tmp_path, task, command(agent))
    outcome = asyncio.run(ShellRunner(provider).run(spec))
    assert outcome.error is None and outcome.reward == 1.0, outcome.error
    python = (spec.artifacts_dir / "agent" / "python.txt").read_text().splitlines()
    assert python == [f"{KNOWN} 198.51.100.7", "nowhere.envloop-dns.zz gaierror"]
    assert "198.51.100.7" in (spec.artifacts_dir / "agent" / "getent.txt").read_text()
    found = dict(looked_up(outcome))
    assert set(found) == {KNOWN, "nowhere.envloop-dns.zz"}
    # A lookup the stub answered too late on a loaded machine is asked again: `unanswered` beside.
    assert set(found[KNOWN]) - {"unanswered"} == {"resolved"}
    assert set(found["nowhere.envloop-dns.zz"]) - {"unanswered"} == {"unresolved"}
    # As `el trial get` and the console show them: the name alone, its lookups by result.
    shown = {one.label(): one.summary() for one in outcome.destinations.shown()}  # type: ignore[union-attr]
    unresolved = found["nowhere.envloop-dns.zz"]["unresolved"]
    assert shown["nowhere.envloop-dns.zz"].endswith(f"{unresolved} unresolved")  # of IPv4 addresses alone
    if found["nowhere.envloop-dns.zz"] == {"unresolved": 1}:
        assert shown["nowhere.envloop-dns.zz"] == "1 direct lookup: 1 unresolved"


@pytest.mark.usefixtures("upstream")
def test_two_trials_at_once_each_record_only_the_names_they_looked_up(tmp_path: Path) -> None:
    task = task_with_lookup(tmp_path / "task")
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    spec_a = spec_for(tmp_path, task, command("sleep 1; python3 /look_up.py a.envloop-dns.zz; sleep 3"))
    spec_b = spec_for(tmp_path, task, command("sleep 2; python3 /look_up.py b.envloop-dns.zz; sleep 2"))

    async def both() -> list[TrialOutcome]:
        return list(await asyncio.gather(*(ShellRunner(provider).run(s) for s in (spec_a, spec_b))))

    outcome_a, outcome_b = asyncio.run(both())
    assert [label for label, _ in looked_up(outcome_a)] == ["a.envloop-dns.zz"], looked_up(outcome_a)
    assert [label for label, _ in looked_up(outcome_b)] == ["b.envloop-dns.zz"], looked_up(outcome_b)
    # A lookup the stub answered too late on a loaded machine is asked again: `unanswered` beside.
    assert set(dict(looked_up(outcome_a))["a.envloop-dns.zz"]) - {"unanswered"} == {"resolved"}
    assert set(dict(looked_up(outcome_b))["b.envloop-dns.zz"]) - {"unanswered"} == {"unresolved"}


@pytest.mark.usefixtures("upstream")
def test_a_name_the_task_depends_on_that_its_resolvers_fail_counts_against_the_environment(
    tmp_path: Path,
) -> None:
    # The task names the failing name; a name no file names that does not exist is the agent's.
    task = task_with_lookup(tmp_path / "task", note=f"checks {FAILING}")
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    agent = f"python3 /look_up.py {FAILING} agent-chose.envloop-dns.zz"
    outcome = asyncio.run(ShellRunner(provider).run(spec_for(tmp_path, task, command(agent))))
    assert outcome.error is not None and outcome.error.type == "environment_error"
    assert outcome.error.message == (
        f"agent phase: {FAILING} could not be resolved from this machine (its resolvers did not answer)"
    )
    assert set(dict(looked_up(outcome))[FAILING]) == {"unanswered"}


@pytest.mark.usefixtures("upstream")
def test_a_name_under_a_reserved_domain_is_never_this_machines_shortfall(tmp_path: Path) -> None:
    task = task_with_lookup(tmp_path / "task", note="checks servfail.envloop-dns.test")
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    agent = "python3 /look_up.py servfail.envloop-dns.test"
    outcome = asyncio.run(ShellRunner(provider).run(spec_for(tmp_path, task, command(agent))))
    assert outcome.error is None and outcome.reward == 1.0, outcome.error


ODD = (
    "import socket, struct, sys\n"
    "gateway, name = sys.argv[1], sys.argv[2]\n"
    "qname = b''.join(bytes([len(p)]) + p.encode() for p in name.split('.')) + b'\\x00'\n"
    "def query(ident, flags, qclass=1, opt=b''):\n"
    "    header = struct.pack('!HHHHHH', ident, flags, 1, 0, 0, 1 if opt else 0)\n"
    "    return header + qname + struct.pack('!HH', 1, qclass) + opt\n"
    "def opt(version=0, options=b''):\n"
    "    return b'\\x00' + struct.pack('!HHBBHH', 41, 1232, 0, version, 0, len(options)) + options\n"
    "shapes = {\n"
    "    'chaos': query(1, 0x0100, qclass=3),\n"
    "    'any-class': query(2, 0x0100, qclass=255),\n"
    "    'edns-version': query(3, 0x0100, opt=opt(version=1)),\n"
    "    'edns-option': query(4, 0x0100, opt=opt(options=struct.pack('!HH', 65001, 1) + b'x')),\n"
    "    'z-flag': query(5, 0x0140),\n"
    "    'aa-flag': query(6, 0x0500),\n"
    "}\n"
    "udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "udp.settimeout(6)\n"
    "for label, wire in shapes.items():\n"
    "    udp.sendto(wire, (gateway, 53))\n"
    "    try:\n"
    "        print(label, udp.recv(4096)[3] & 0x0F)\n"
    "    except OSError as exc:\n"
    "        print(label, type(exc).__name__)\n"
)
FLOOD = (
    "import os, socket, sys\n"
    "udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "for number in range(20):  # names of its own, sent without waiting for answers\n"
    "    name = f'flood{number}'.encode()\n"
    "    wire = os.urandom(2) + bytes.fromhex('01000001000000000000') + bytes([len(name)]) + name\n"
    "    udp.sendto(wire + b'\\x00\\x00\\x01\\x00\\x01', (sys.argv[1], 53))\n"
    "try:  # at once, while the resolvers shed the flood\n"
    "    print(sys.argv[2], socket.getaddrinfo(sys.argv[2], 80, socket.AF_INET)[0][4][0])\n"
    "except OSError as exc:\n"
    "    print(sys.argv[2], type(exc).__name__)\n"
)


def task_with(root: Path, note: str, **scripts: str) -> Path:
    task = task_with_lookup(root, note=note)
    for name, script in scripts.items():
        (task / "environment" / f"{name}.py").write_text(script)
    copied = " ".join(["fetch.py", "look_up.py", *(f"{name}.py" for name in scripts)])
    dockerfile = f"FROM python:3.11-slim\nCOPY {copied} /\nWORKDIR /app\n"
    (task / "environment" / "Dockerfile").write_text(dockerfile)
    return task


@pytest.mark.usefixtures("upstream")
def test_an_agents_odd_queries_for_a_name_the_task_depends_on_leave_its_verdict_standing(
    tmp_path: Path,
) -> None:
    # The upstream refuses or rejects each of these shapes as sent (tests/dns_upstream.py); the
    # observer forwards a plain query of its own instead, and a class other than IN is no lookup
    # of an address.
    task = task_with(tmp_path / "task", f"checks {KNOWN}", odd=ODD)
    gateway = gateway_of(asyncio.run(shared_network("public")).name)
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    agent = f"python3 /odd.py {gateway} {KNOWN} > /logs/agent/odd.txt"
    spec = spec_for(tmp_path, task, command(agent))
    outcome = asyncio.run(ShellRunner(provider).run(spec))
    assert outcome.error is None and outcome.reward == 1.0, outcome.error
    answered = (spec.artifacts_dir / "agent" / "odd.txt").read_text().split()
    codes = dict(zip(answered[::2], answered[1::2], strict=True))
    # Asked as plain queries of class IN, the odd shapes get the name's address (rcode 0)...
    assert [codes.pop(shape) for shape in ("edns-version", "edns-option", "z-flag", "aa-flag")] == ["0"] * 4
    assert dict(looked_up(outcome))[KNOWN] == {"resolved": 4}
    # ...and the other classes are refused (SERVFAIL when this loaded machine's upstream was too slow
    # to say so): failed lookups, but of no address, so never the machine's.
    assert set(codes) == {"chaos", "any-class"} and set(codes.values()) <= {"5", "2"}, codes


def test_an_agent_that_floods_the_resolvers_until_its_own_lookup_times_out_keeps_its_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The upstream sheds a flood as a rate-limited resolver does; asked again once the trial's
    # processes are gone, it answers: the failure was the agent's doing, not the machine's.
    task = task_with(tmp_path / "task", f"checks {KNOWN}", flood=FLOOD)
    gateway = gateway_of(asyncio.run(shared_network("public")).name)
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    agent = f"python3 /flood.py {gateway} {KNOWN}"
    with stub_resolver({KNOWN: "198.51.100.7"}, shed=5) as shedding:
        monkeypatch.setenv("ENVLOOP_DNS_UPSTREAM", shedding.upstream)
        outcome = asyncio.run(ShellRunner(provider).run(spec_for(tmp_path, task, command(agent))))
    assert KNOWN in shedding.shed_names  # the agent's own lookup did go unanswered
    assert outcome.error is None and outcome.reward == 1.0, outcome.error
    assert "unanswered" in dict(looked_up(outcome))[KNOWN]


def gateway_of(network: str) -> str:
    shown = subprocess.run(
        [docker_binary(), "network", "inspect", network], capture_output=True, text=True, check=True
    )
    return str(json.loads(shown.stdout)[0]["IPAM"]["Config"][0]["Gateway"])


HOSTILE = (
    "import socket, struct, sys\n"
    "gateway = sys.argv[1]\n"
    "udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "for wire in (b'', b'\\xff' * 40, b'\\x00' * 4000, b'\\x12\\x34\\x81\\x80' + b'\\x00' * 8):\n"
    "    udp.sendto(wire, (gateway, 53))\n"
    "query = b'\\x00\\x01\\x01\\x00\\x00\\x01' + b'\\x00' * 6 + b'\\x07example\\x00\\x00\\x01\\x00\\x01'\n"
    "for _ in range(300):  # a flood of well-formed queries, sent without waiting for answers\n"
    "    udp.sendto(query, (gateway, 53))\n"
    "tcp = socket.create_connection((gateway, 53), timeout=3)\n"
    "tcp.sendall(struct.pack('!H', 65535) + b'\\x00' * 100)\n"
    "try:\n"
    "    print('closed' if tcp.recv(10) == b'' else 'answered')\n"
    "except OSError as exc:\n"
    "    print(type(exc).__name__)\n"
)
PROBE = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close(); print('REACHED')\n"
    "except OSError as exc:\n"
    "    print(type(exc).__name__)\n"
)


@pytest.mark.usefixtures("upstream")
def test_hostile_queries_never_stall_the_observer_and_it_opens_no_other_host_port(tmp_path: Path) -> None:
    root = task_with_lookup(tmp_path / "task")
    (root / "environment" / "hostile.py").write_text(HOSTILE)
    (root / "environment" / "probe.py").write_text(PROBE)
    (root / "environment" / "Dockerfile").write_text(
        "FROM python:3.11-slim\nCOPY fetch.py look_up.py hostile.py probe.py /\nWORKDIR /app\n"
    )
    task = load_harbor_task(root)
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    gateway = gateway_of(asyncio.run(shared_network("public")).name)
    # A service of the host's on the gateway address, beside the observer: the trial must not reach it.
    with socket.create_server((gateway, 0)) as service:
        port = service.getsockname()[1]

        async def attack() -> tuple[str, str, str, str]:
            async with provider.instance(task, spec_for(tmp_path, root, {})) as env:
                hostile = (await env.exec(["python3", "/hostile.py", gateway])).stdout.strip()
                after = (await env.exec(["python3", "/look_up.py", KNOWN])).stdout.strip()
                other = (await env.exec(["python3", "/probe.py", gateway, str(port)])).stdout.strip()
                dns_tcp = (await env.exec(["python3", "/probe.py", gateway, "53"])).stdout.strip()
                return hostile, after, other, dns_tcp

        hostile, after, other, dns_tcp = asyncio.run(attack())
    assert hostile == "closed", hostile  # the oversized TCP query was dropped, not held open
    assert after == f"{KNOWN} 198.51.100.7"  # and the observer still answers
    assert dns_tcp == "REACHED"
    assert other in ("TimeoutError", "timeout"), f"the trial reached another port of the host: {other}"


def observer_rules(identity: str) -> list[str]:
    listed = subprocess.run(["iptables", "-w", "-S", INPUT_CHAIN], capture_output=True, text=True, check=True)
    return [line for line in listed.stdout.splitlines() if identity in line]


def test_the_observers_rules_go_when_its_worker_exits_or_dies(tmp_path: Path) -> None:
    task = write_task(tmp_path / "task", solve="sleep 600")
    done, identity = run_worker(
        tmp_path, spec_for(tmp_path, task, command(f"python3 /fetch.py {registry_url()}"))
    )
    assert done.wait(timeout=240) == 0
    assert observer_rules(identity) == [] and leftovers(identity) == []

    killed = spec_for(tmp_path, task, {"AGENT_NAME": "oracle"})
    dying, identity = run_worker(tmp_path, killed)
    asyncio.run(command_running(killed.trial_id, "sleep 600"))
    assert len(observer_rules(identity)) == 2  # UDP and TCP to the observer's port, nothing else
    assert len(labelled("network", f"envloop.worker={identity}")) == 1
    os.kill(dying.pid, signal.SIGKILL)
    dying.wait(timeout=30)
    time.sleep(0.5)
    asyncio.run(sweep_orphans())  # what the next worker does when it starts
    assert asyncio.run(sweep_rules()) >= 2  # with those of any other worker killed before
    assert observer_rules(identity) == []
