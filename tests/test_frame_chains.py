"""The ebtables chains of shared bridges (ENVLOOP-ARP, ENVLOOP-MAC) end in RETURN, whoever made
them: `ebtables -N` alone ends a chain in a rule that accepts, which lets a frame the chain passes
skip the rest of the host's INPUT and FORWARD, and which every listing of the chain deletes and adds
again, so two workers listing at once (a sweep, a start) failed one of them.

Each test works in a network namespace of its own: the host's rules are not touched."""

import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or any(shutil.which(tool) is None for tool in ("unshare", "ebtables", "nft")),
    reason="a network namespace of its own needs root, unshare(1), ebtables and nft",
)

INSTALL = (
    f"{sys.executable} -c 'import asyncio; "
    "from envloop.environments.docker.firewall import install_frame_chains as i; asyncio.run(i())'"
)
LISTERS = """
lister() {
  failed=0
  for i in $(seq 1 30); do
    ebtables -t nat -L ENVLOOP-MAC >/dev/null 2>&1 || failed=$((failed + 1))
    ebtables -t filter -L ENVLOOP-ARP >/dev/null 2>&1 || failed=$((failed + 1))
  done
  echo "failed $failed"
}
for j in 1 2 3 4 5 6; do lister & done
wait
"""
RULES = """
for i in 1 2 3; do ebtables -t nat -A ENVLOOP-MAC -s 02:42:c0:a8:a0:0$i ! -i veth$i -j DROP; done
ebtables -A ENVLOOP-ARP -p ARP --arp-ip-src 10.9.0.0/24 -j DROP
"""
SHOW = (
    "nft list chain bridge nat ENVLOOP-MAC; nft list chain bridge filter ENVLOOP-ARP; "
    "ebtables -t nat -L; ebtables -L"
)


def _in_namespace(script: str) -> str:
    done = subprocess.run(
        ["unshare", "--net", "sh", "-ec", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _accepting(listing: str) -> list[str]:
    """The rules that end a chain in ACCEPT, as nft lists them."""
    return [line.strip() for line in listing.splitlines() if line.strip().endswith(" accept")]


def test_chains_made_here_end_in_return_and_are_listed_by_many_at_once() -> None:
    out = _in_namespace(f"{INSTALL}\n{RULES}\n{LISTERS}\n{SHOW}")
    assert [line for line in out.splitlines() if line.startswith("failed")] == ["failed 0"] * 6
    assert _accepting(out) == []
    assert "Bridge chain: ENVLOOP-MAC, entries: 3, policy: RETURN" in out
    assert "Bridge chain: ENVLOOP-ARP, entries: 1, policy: RETURN" in out
    assert "-p ARP -j ENVLOOP-ARP" in out.split("Bridge chain: INPUT")[1]
    assert "-p ARP -j ENVLOOP-ARP" in out.split("Bridge chain: FORWARD")[1]
    assert "-j ENVLOOP-MAC" in out.split("Bridge chain: PREROUTING")[1]


def test_chains_an_earlier_worker_left_ending_in_accept_end_in_return_and_keep_their_rules() -> None:
    made_by_hand = "ebtables -N ENVLOOP-ARP; ebtables -t nat -N ENVLOOP-MAC"
    before = _in_namespace(f"{made_by_hand}\n{RULES}\n{SHOW}")
    assert len(_accepting(before)) == 2, "ebtables -N no longer ends a chain in ACCEPT: say so"
    after = _in_namespace(f"{made_by_hand}\n{RULES}\n{INSTALL}\n{LISTERS}\n{SHOW}")
    assert _accepting(after) == []
    assert [line for line in after.splitlines() if line.startswith("failed")] == ["failed 0"] * 6
    assert "Bridge chain: ENVLOOP-MAC, entries: 3, policy: RETURN" in after
    assert "-s 02:42:c0:a8:a0:01 -i ! veth1 -j DROP" in after


def test_workers_installing_at_once_all_succeed() -> None:
    together = f"for j in 1 2 3 4; do ({INSTALL} && echo installed) & done\nwait\n{SHOW}"
    out = _in_namespace(together)
    assert out.count("installed") == 4
    assert _accepting(out) == []
    assert "Bridge chain: ENVLOOP-MAC, entries: 0, policy: RETURN" in out
