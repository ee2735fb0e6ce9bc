"""Loopback ports for the servers the tests start, and for addresses where nothing listens."""

import socket
from collections.abc import Iterator
from contextlib import contextmanager

import psutil


def free_port(host: str = "127.0.0.1", *, datagrams: bool = False) -> int:
    """A port the kernel just handed out on `host` and that nothing holds now, for a server about to
    start to bind. Another process may bind it first: a test that starts a server checks that the
    server it reaches is its own (`api_server.start_server`), and one that wants a port where
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
