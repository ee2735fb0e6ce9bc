"""A real Ray cluster on loopback for the tests: a head and worker nodes started with `ray start`,
each in a process group of its own so a node can be killed alone (as a machine would die).

Token authentication is on for every node and for the drivers (RAY_AUTH_MODE=token with a token
made for the run). The GCS listens on 26380, outside Ray's worker port range (10002 to 19999). Nodes
take addresses of their own in 127.0.0.0/8 (Ray turns 127.0.0.1 itself into the host's network
address), so all traffic stays on loopback. Starting is bounded in time; a cluster that cannot start
raises, and the test fails.
"""

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

GCS_PORT = 26380
HEAD_IP = "127.0.0.2"
START_TIMEOUT_SEC = 90.0
_RAY = str(Path(sys.executable).parent / "ray")

ONE_CLUSTER_AT_A_TIME = pytest.mark.xdist_group("ray")
"""For every test that starts a cluster: the GCS port and the nodes' addresses are fixed, and the
executor's run directories are shared under the system's temporary directory, so two clusters of
one test run would collide; these tests all go to one pytest-xdist worker, one after another."""

_WAIT_FOR_NODES = """
import sys, time, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
want, deadline = int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
while time.monotonic() < deadline:
    alive = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0]
    if len(alive) >= want:
        sys.exit(0)
    time.sleep(0.2)
sys.exit(f"only {len(alive)} of {want} Ray worker nodes joined in time")
"""


class RayCluster:
    def __init__(self) -> None:
        # Short: Ray's socket paths live under it and must fit in 107 bytes.
        self.temp_dir = Path(tempfile.mkdtemp(prefix="elray-", dir="/tmp"))
        self.env = {
            **os.environ,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": secrets.token_hex(32),
            "RAY_USAGE_STATS_ENABLED": "0",
        }
        self.address = f"{HEAD_IP}:{GCS_PORT}"
        self.head: subprocess.Popen[bytes] | None = None
        self.nodes: dict[str, subprocess.Popen[bytes]] = {}

    def _start(self, args: list[str], log: str) -> subprocess.Popen[bytes]:
        with (self.temp_dir / log).open("ab") as out:
            return subprocess.Popen(
                [_RAY, "start", "--block", "--disable-usage-stats", *args],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def start(self) -> None:
        """The head (no CPUs: trials run only on worker nodes) and one worker node."""
        self.head = self._start(
            [
                "--head",
                f"--port={GCS_PORT}",
                f"--node-ip-address={HEAD_IP}",
                "--num-cpus=0",
                "--include-dashboard=false",
                f"--temp-dir={self.temp_dir}",
            ],
            "head.log",
        )
        self.add_node("127.0.0.3")

    def add_node(self, ip: str, cpus: int = 2) -> None:
        """Start a worker node on `ip` and wait until the cluster counts it."""
        self.nodes[ip] = self._start(
            [f"--address={self.address}", f"--node-ip-address={ip}", f"--num-cpus={cpus}"], f"node-{ip}.log"
        )
        self.wait_for_nodes(len(self.nodes))

    def wait_for_nodes(self, count: int) -> None:
        proc = subprocess.run(
            [sys.executable, "-c", _WAIT_FOR_NODES, self.address, str(count), str(START_TIMEOUT_SEC)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_SEC + 30,
            check=False,
        )
        if proc.returncode != 0:
            logs = "".join(p.read_text(errors="replace")[-1500:] for p in sorted(self.temp_dir.glob("*.log")))
            raise RuntimeError(f"the Ray cluster did not start: {proc.stderr.strip()[-1500:]}\n{logs}")

    def kill_node(self, ip: str) -> None:
        """SIGKILL the node's whole process group: its raylet and every Ray worker on it."""
        proc = self.nodes.pop(ip)
        _kill_group(proc, signal.SIGKILL)

    def stop(self) -> None:
        for proc in [*self.nodes.values(), *([self.head] if self.head else [])]:
            _kill_group(proc, signal.SIGTERM, grace=10.0)
        self.nodes.clear()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _kill_group(proc: subprocess.Popen[bytes], sig: signal.Signals, grace: float = 5.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):  # whatever of the group outlived the signal
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
