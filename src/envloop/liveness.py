"""Whether a process another one recorded still runs: its host, its pid and its start time.

A worker records its own in its row of the store, a trial container in a label, a Ray run in a file
of its directory. A worker killed by a signal or the out-of-memory killer cannot clean up after
itself; whoever comes next on the same host can see it is gone and do it at once: hand its trials
back, remove its containers. A process of another host is never judged from here. The host is its
name unless ENVLOOP_WORKER_HOST names it (several hosts sharing a name, as the test suite's
processes do).
"""

import os
import socket

import psutil

from envloop.settings import env_name, settings

HOST_VARIABLE = env_name("worker_host")

START_TOLERANCE_SEC = 1.0
"""How far two readings of one process's start time may differ: the kernel counts it from boot in
clock ticks and psutil adds a boot time of whole seconds, and labels keep whole seconds. A process
that took a dead one's pid within this much of its start counts as the same one (the safe side: its
trials then wait for their leases to expire)."""


def this_host() -> str:
    return settings().worker_host or socket.gethostname()


def start_time(pid: int | None = None) -> float:
    """When a process (this one by default) started, in seconds since the epoch."""
    return float(psutil.Process(pid).create_time())


def gone(host: str, pid: int, started: float) -> bool:
    """True only when the process ran on this host and has `ended` there."""
    return host == this_host() and ended(pid, started)


def ended(pid: int, started: float) -> bool:
    """No process of this host with that pid and start time runs now (a zombie, dead but not yet
    reaped by its parent, has ended)."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return True
        return abs(process.create_time() - started) >= START_TOLERANCE_SEC
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:  # not ours to read: it runs
        return False


def process_identity(pid: int | None = None) -> str:
    """`host:pid:start-time` of a process (this one by default): what a container label, a firewall
    rule or a mounted file system records of the worker that made it, for `identity_gone` to read."""
    return f"{this_host()}:{pid or os.getpid()}:{int(start_time(pid))}"


def identity_gone(identity: str) -> bool:
    """True when the process `identity` names ran on this host and is no longer alive; False for
    anything that is not an identity."""
    parts = identity.rsplit(":", 2)
    if len(parts) != 3:
        return False
    host, pid, started = parts
    if not host or not pid.isdigit() or not started.isdigit():
        return False
    return gone(host, int(pid), float(started))
