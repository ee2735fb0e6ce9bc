"""Public trials for the docker tests of the worker's shared egress (test_docker_shared_egress.py)
and of its DNS observer (test_docker_dns_observer.py): a task that fetches and passes, a trial spec
for it, a worker process of its own to run one in, and what such a worker leaves behind.
"""

import os
import subprocess
import sys
from pathlib import Path

from envloop.core.ids import new_id
from envloop.core.trial import TrialSpec
from envloop.environments.docker.cli import docker_binary
from envloop.environments.docker.firewall import SHARED_CHAIN, SOURCE_CHAIN
from envloop.liveness import process_identity

REPO = Path(__file__).resolve().parents[1]
FETCH = (
    "import sys, urllib.request\n"
    "for url in sys.argv[1:]:\n"
    "    try:\n"
    "        print(url, urllib.request.urlopen(url, timeout=15).status)\n"
    "    except Exception as exc:\n"
    "        print(url, type(exc).__name__)\n"
)


def write_task(root: Path, note: str = "", solve: str = "") -> Path:
    for sub in ("tests", "solution", "environment"):
        (root / sub).mkdir(parents=True)
    (root / "task.toml").write_text(f'version = "1.0"\n# {note}\n[environment]\nnetwork_mode = "public"\n')
    (root / "instruction.md").write_text("Fetch.\n")
    (root / "environment" / "fetch.py").write_text(FETCH)
    (root / "environment" / "Dockerfile").write_text(
        "FROM python:3.11-slim\nCOPY fetch.py /fetch.py\nWORKDIR /app\n"
    )
    (root / "tests" / "test.sh").write_text("#!/usr/bin/env bash\necho 1 > /logs/verifier/reward.txt\n")
    (root / "solution" / "solve.sh").write_text(f"#!/usr/bin/env bash\n{solve}\n")
    return root


def spec_for(tmp_path: Path, task: Path, params: dict[str, str]) -> TrialSpec:
    trial_id = new_id("trl")
    return TrialSpec(
        job_id="job_shared_egress",
        trial_id=trial_id,
        task_name=task.name,
        attempt=1,
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params=params,
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts" / trial_id,
    )


def command(agent: str) -> dict[str, str]:
    return {"AGENT_NAME": "command", "AGENT_COMMAND": agent}


def labelled(kind: str, *labels: str) -> list[str]:
    """Names of the containers (`ps`) or networks (`network`) carrying every one of `labels`."""
    filters = [word for label in labels for word in ("--filter", f"label={label}")]
    shown = "{{.Name}}" if kind == "network" else "{{.Names}}"
    listing = [
        docker_binary(),
        *(["ps", "-a"] if kind == "ps" else ["network", "ls"]),
        *filters,
        "--format",
        shown,
    ]
    return subprocess.run(listing, capture_output=True, text=True, check=True).stdout.split()


def rules_of(identity: str) -> list[str]:
    found = []
    for chain in (SOURCE_CHAIN, SHARED_CHAIN):
        listed = subprocess.run(["iptables", "-w", "-S", chain], capture_output=True, text=True, check=True)
        found += [line for line in listed.stdout.splitlines() if identity in line]
    return found


WORKER = """
import asyncio, json, os, sys
from pathlib import Path
from envloop.core.trial import TrialSpec
from envloop.environments.docker.images import BuildRecords
from envloop.liveness import process_identity
from envloop.environments.docker.provider import DockerEnvironmentProvider
from envloop.runners import ShellRunner
spec = TrialSpec.model_validate_json(sys.argv[1])
print(process_identity(), flush=True)
provider = DockerEnvironmentProvider(BuildRecords(Path(sys.argv[2])))
asyncio.run(ShellRunner(provider).run(spec))
"""


def run_worker(tmp_path: Path, spec: TrialSpec) -> tuple[subprocess.Popen[str], str]:
    """A worker process running `spec`, and its identity (what labels and names its resources)."""
    process = subprocess.Popen(
        [sys.executable, "-c", WORKER, spec.model_dump_json(), str(tmp_path / "builds")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def leftovers(identity: str) -> list[str]:
    """The containers, networks and firewall rules of the worker `identity` still there."""
    label = f"envloop.worker={identity}"
    return labelled("ps", label) + labelled("network", label) + rules_of(identity)


def proxies() -> list[str]:
    """This process's shared proxies."""
    return labelled("ps", f"envloop.worker={process_identity()}", "envloop.shared=proxy")


RAW = """\
import os, random, socket, struct, sys, time, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])


def checksum(data):
    data += b"\\0" * (len(data) % 2)
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    return ~(total + (total >> 16)) & 0xFFFF


def syn(source, port):
    # A TCP SYN to the proxy's port, from `source`: crafted whole, so any address can stand there.
    tcp = struct.pack("!HHIIBBHHH", port, proxy.port, random.getrandbits(32), 0, 5 << 4, 2, 64240, 0, 0)
    pseudo = socket.inet_aton(source) + socket.inet_aton(proxy.hostname) + struct.pack("!BBH", 0, 6, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", checksum(pseudo + tcp)) + tcp[18:]
    addresses = socket.inet_aton(source) + socket.inet_aton(proxy.hostname)
    ip = struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(tcp), random.getrandbits(16), 0, 64, 6, 0) + addresses
    return ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:] + tcp


def listen(port, seconds):
    # Whether the proxy answers a SYN from `port` (a SYN-ACK reaches this container).
    sniff = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0800))
    sniff.settimeout(0.2)
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            ip = sniff.recv(65535)[14:]
        except socket.timeout:
            continue
        head = (ip[0] & 15) * 4
        if ip[9] == 6 and struct.unpack("!HH", ip[head : head + 4]) == (proxy.port, port):
            if ip[head + 13] & 0x12 == 0x12:
                return "ANSWERED"
    return "SILENT"


def poison(target, seconds):
    # ARP requests to everyone on the bridge, saying the proxy's address is this container's.
    mac = bytes.fromhex(open("/sys/class/net/eth0/address").read().strip().replace(":", ""))
    claim = mac + socket.inet_aton(proxy.hostname) + bytes(6) + socket.inet_aton(target)
    frame = b"\\xff" * 6 + mac + b"\\x08\\x06" + struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + claim
    sender = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sender.bind(("eth0", 0))
    deadline = time.time() + seconds
    while time.time() < deadline:
        sender.send(frame)
        time.sleep(0.05)


if sys.argv[1] == "listen":
    print(listen(int(sys.argv[2]), float(sys.argv[3])), flush=True)
elif sys.argv[1] == "poison":
    poison(sys.argv[2], float(sys.argv[3]))
else:
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    for _ in range(3):
        raw.sendto(syn(sys.argv[2], int(sys.argv[3])), (proxy.hostname, 0))
        time.sleep(0.2)
"""
