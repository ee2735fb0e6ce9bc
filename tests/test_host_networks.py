"""The host's networks, as every new public trial network asks for them: `ip route` runs again only
when the kernel's routing views changed, and a network the host joins is rejected from the very next
trial on, never a reading later.

Each test runs in a network namespace of its own (`unshare -n`), whose links and routes it makes:
nothing of the host's changes.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None,
    reason="a network namespace of the test's own needs root, unshare and ip",
)

SCRIPT = """
import json, os, subprocess, sys
from envloop.environments.forbidden_ranges import host_networks

def ip(*args):
    subprocess.run(["ip", *args], check=True)

seen = {}
ip("link", "set", "lo", "up")
seen["empty"] = host_networks(4)
ip("link", "add", "t0", "type", "veth", "peer", "name", "t1")
ip("addr", "add", "11.22.33.1/24", "dev", "t0")
ip("link", "set", "t1", "up")
ip("link", "set", "t0", "up")
seen["joined"] = host_networks(4)
ip("route", "add", "11.44.0.0/16", "via", "11.22.33.9", "table", "7")
seen["routed"] = host_networks(4)
# Without `ip` on the PATH a reading finds nothing: what comes back while the routes stay as they
# are is the last reading's, and a change of routes is read at once.
path, os.environ["PATH"] = os.environ["PATH"], sys.argv[1]
seen["unchanged"] = host_networks(4)
os.environ["PATH"] = path
ip("addr", "del", "11.22.33.1/24", "dev", "t0")
os.environ["PATH"] = sys.argv[1]
seen["left"] = host_networks(4)
print(json.dumps(seen))
"""


def test_a_network_the_host_joins_or_leaves_is_read_at_once_and_ip_runs_only_on_a_change(
    tmp_path: Path,
) -> None:
    no_tools = tmp_path / "no-tools"
    no_tools.mkdir()
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", SCRIPT, str(no_tools)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["empty"] == []
    assert "11.22.33.0/24" in seen["joined"]
    assert "11.22.33.1/32" in seen["joined"]
    assert "11.22.33.9/32" in seen["routed"]
    assert seen["unchanged"] == seen["routed"]
    assert seen["left"] == []
