"""Keeping a local `public` trial on the internet: what pasta may connect to on its behalf.

A local trial's network is pasta's: the trial's packets become sockets pasta opens on the host, as
the trial's own host uid (see `identity`). Left alone, those sockets reach whatever the host
reaches: its gateway, the networks it is on, reserved ranges. One chain of envloop's own, installed
once per host and shared by every worker process, holds for every trial uid:

- `ENVLOOP-OUTPUT` (from OUTPUT, for sockets owned by the trial uid range; IPv4 and IPv6, since
  pasta gives a trial the host's IPv6 too): loopback passes (pasta
  forwards the model gateway's port there, and nothing else: the gateway address is not mapped to
  the host), and so does DNS to the host's resolvers; every range `forbidden_ranges` names (the
  non-global ranges, the host's networks, gateways and own addresses, read again for each new
  network of a trial) is rejected.

Only a root worker gives trials uids of their own, so only there can the host tell a trial's
sockets from the worker's: a worker that is not root runs trials as its own user, without this
chain (see the security page). A root worker without `iptables` cannot keep the promise, and a
trial that asks for a network is refused rather than run with the host's networks open.
"""

import shutil
import subprocess
import threading

from envloop.environments.base import EnvironmentSetupError
from envloop.environments.forbidden_ranges import NOT_GLOBAL, NOT_GLOBAL_V6, host_networks, resolvers
from envloop.environments.local.identity import TRIAL_UID_RANGE

OUTPUT_CHAIN = "ENVLOOP-OUTPUT"
_TIMEOUT_SEC = 30.0

_lock = threading.Lock()
_installed = False
_rejected_host_networks: set[str] = set()


_TOOLS = {4: "iptables", 6: "ip6tables"}
_LOOPBACK = {4: "127.0.0.0/8", 6: "::1/128"}
_FIXED = {4: NOT_GLOBAL, 6: NOT_GLOBAL_V6}


def _iptables(version: int, *args: str) -> bool:
    try:
        done = subprocess.run(
            [_TOOLS[version], "-w", *args], capture_output=True, check=False, timeout=_TIMEOUT_SEC
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentSetupError(f"{_TOOLS[version]} {' '.join(args)}: {exc}") from None
    return done.returncode == 0


def _must(version: int, *args: str) -> None:
    if not _iptables(version, *args):
        raise EnvironmentSetupError(
            f"{_TOOLS[version]} {' '.join(args)} failed: a local public trial's network cannot be kept "
            "off the host's networks here"
        )


def _ensure_rule(version: int, *rule: str, first: bool = False) -> None:
    chain, *rest = rule
    if not _iptables(version, "-C", chain, *rest):
        _must(version, "-I", chain, "1", *rest) if first else _must(version, "-A", chain, *rest)


def _install(version: int) -> None:
    if shutil.which(_TOOLS[version]) is None:
        raise EnvironmentSetupError(
            f"a local trial network needs {_TOOLS[version]} here, to keep it off the host's networks; "
            "install it, or close trial networks (ENVLOOP_TRIAL_NETWORK=none)"
        )
    if not _iptables(version, "-n", "-L", OUTPUT_CHAIN):
        _must(version, "-N", OUTPUT_CHAIN)
    # Added when missing, never flushed: another worker process may be using the chain right now.
    _ensure_rule(version, OUTPUT_CHAIN, "-o", "lo", "-d", _LOOPBACK[version], "-j", "RETURN")
    for resolver in resolvers(version):
        for protocol in ("udp", "tcp"):
            _ensure_rule(
                version, OUTPUT_CHAIN, "-d", resolver, "-p", protocol, "--dport", "53", "-j", "RETURN"
            )
    for network in _FIXED[version]:
        _ensure_rule(version, OUTPUT_CHAIN, "-d", network, "-j", "REJECT")
    first, last = TRIAL_UID_RANGE
    owner = ("-m", "owner", "--uid-owner", f"{first}-{last}")
    _ensure_rule(version, "OUTPUT", *owner, "-j", OUTPUT_CHAIN, first=True)


def ensure_public_guard() -> None:
    """Install the chain (once per process; idempotent across processes) and reject the networks
    the host is on now. Blocking: a few `iptables` runs the first time, one `ip route` after."""
    global _installed  # noqa: PLW0603 (installed once per process)
    with _lock:
        if not _installed:
            for version in _TOOLS:
                _install(version)
            _installed = True
        for version in _TOOLS:
            for network in host_networks(version):
                if network not in _rejected_host_networks:
                    _ensure_rule(version, OUTPUT_CHAIN, "-d", network, "-j", "REJECT")
                    _rejected_host_networks.add(network)
