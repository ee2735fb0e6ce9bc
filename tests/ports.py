"""Loopback ports for the servers the tests start, and for addresses where nothing listens."""

import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psutil

BIND_TRIES = 3


def free_port(host: str = "127.0.0.1", *, datagrams: bool = False) -> int:
    """A port the kernel just handed out on `host` and that nothing holds now, for a server about to
    start to bind. Another process may bind it first: a test that starts a server has it checked
    that the server it reaches is its own (`serve_on_a_free_port`), and one that wants a port where
    nothing listens holds one (`refusing_port`).

    With `datagrams` the port is free for UDP too, for a server that listens on both (DNS): the
    ports UDP clients are given are picked at random, so one may hold the TCP port just handed out."""
    while True:
        with socket.socket() as stream:
            stream.bind((host, 0))
            port = int(stream.getsockname()[1])
            if not datagrams:
                return port
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as datagram:
                try:
                    datagram.bind((host, port))
                except OSError:
                    continue
                return port


@contextmanager
def refusing_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port on `host` that refuses every connection while the block runs: bound here and never
    listened on, so no other process can start a server on it meanwhile (a port merely found free
    could be taken by another test's server, which would then answer)."""
    with socket.socket() as held:
        held.bind((host, 0))
        yield int(held.getsockname()[1])


def listens(pid: int, port: int) -> bool:
    """Whether process `pid` itself holds the listening socket on `port`: a server a test started
    on a port found free counts as up only then (another one may have bound the port first and
    would answer in its place)."""
    try:
        sockets = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.Error:
        return False
    return any(s.status == psutil.CONN_LISTEN and s.laddr.port == port for s in sockets)


class NotServing(Exception):
    """A server a test started exited before it answered, or did not answer in time."""


def serve_on_a_free_port(
    start: Callable[[int], "subprocess.Popen[Any]"], answers: Callable[[int], bool], *, timeout: float
) -> tuple["subprocess.Popen[Any]", int]:
    """The server process `start(port)` makes on a port found free, with that port, once
    `answers(port)` holds and the process itself listens there: an answer from another process that
    bound the port first does not count. One that exited while another process held its port is
    started again on a new one, up to BIND_TRIES times. NotServing when it exited for another
    reason, or did not answer within `timeout` (it is killed then)."""
    for _ in range(BIND_TRIES):
        port = free_port()
        proc = start(port)
        deadline = time.monotonic() + timeout
        while proc.poll() is None:
            if answers(port) and listens(proc.pid, port):
                return proc, port
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise NotServing(f"did not answer within {timeout:g} s")
            time.sleep(0.1)
        if not _taken(port):
            raise NotServing(f"exited with {proc.returncode} before it answered")
    raise NotServing(f"found its port taken {BIND_TRIES} times")


def _taken(port: int) -> bool:
    """Whether a process listens on loopback `port` (after a server meant for it exited: the port
    was not free after all)."""
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0
