"""Loopback ports for the servers the tests start, and for addresses where nothing listens."""

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port the kernel just handed out on `host` and that nothing holds now: a server about to
    start binds it, and a client aimed at it meets a refused connection. The kernel hands ports out
    in turn, so test processes running side by side do not get the same one."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
