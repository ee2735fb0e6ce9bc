"""Loopback ports for the servers the tests start, and for addresses where nothing listens."""

import socket


def free_port(host: str = "127.0.0.1", *, datagrams: bool = False) -> int:
    """A port the kernel just handed out on `host` and that nothing holds now: a server about to
    start binds it, and a client aimed at it meets a refused connection. The kernel hands ports out
    in turn, so test processes running side by side do not get the same one.

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
