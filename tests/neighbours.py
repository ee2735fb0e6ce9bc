"""A network namespace of the test's own beside this host, for attacks on the host's surroundings.

The namespace sits behind a veth pair, on a benchmarking address (`198.18.0.0/15`, reserved) and on
a documentation address that only the host's own on-link route leads to, each with a service that
answers anyone and records who connected. Nothing leaves this machine: the addresses are the
namespace's. Needs root and `ip`.
"""

import contextlib
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

SERVICE = """\
import socket, sys
server = socket.create_server(
    ("::", int(sys.argv[1])), family=socket.AF_INET6, dualstack_ipv6=True, backlog=16
)
print("ready", flush=True)
while True:
    connection, peer = server.accept()
    print(peer[0].removeprefix("::ffff:"), flush=True)
    connection.recv(4096)
    connection.sendall(b"HTTP/1.0 200 OK\\r\\nContent-Length: 6\\r\\n\\r\\nSECRET")
    connection.close()
"""


@dataclass
class Neighbour:
    reserved_host: str
    on_link_host: str
    reserved: str
    """The namespace's address in 198.18.0.0/15."""
    on_link: str
    """Its address in a documentation range reached only through the host's on-link route."""
    on_link_network: str
    unique_local_host: str
    unique_local: str
    """Its IPv6 address, in a unique local network (`fd00::/8`) the host is on."""
    port: int
    service: subprocess.Popen[str]

    def peers(self) -> list[str]:
        self.service.terminate()
        out, _ = self.service.communicate(timeout=10)
        return [line for line in out.splitlines() if line != "ready"]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@contextlib.contextmanager
def neighbour() -> Iterator[Neighbour]:
    """A namespace on this host, on a veth of its own, with a service answering on both addresses."""
    tag = secrets.token_hex(3)
    namespace, outside, inside = f"eltns{tag}", f"eltv{tag}", f"eltp{tag}"
    third, quad = secrets.randbelow(250) + 1, secrets.randbelow(60) + 1
    reserved_host, reserved = f"198.18.{third}.1", f"198.18.{third}.2"
    on_link_host, on_link = f"198.51.100.{quad * 4 + 1}", f"198.51.100.{quad * 4 + 2}"
    hextet = f"{int(tag[:4], 16):x}"  # as the kernel writes it back: no leading zero
    unique_local_host, unique_local = f"fd00:e1:{hextet}::1", f"fd00:e1:{hextet}::2"
    _ip("netns", "add", namespace)
    try:
        _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        _ip("link", "set", inside, "netns", namespace)
        _ip("addr", "add", f"{reserved_host}/24", "dev", outside)
        _ip("addr", "add", f"{on_link_host}/30", "dev", outside)
        _ip("addr", "add", f"{unique_local_host}/64", "dev", outside, "nodad")
        _ip("link", "set", outside, "up")
        for command in (
            ("addr", "add", f"{reserved}/24", "dev", inside),
            ("addr", "add", f"{on_link}/30", "dev", inside),
            ("addr", "add", f"{unique_local}/64", "dev", inside, "nodad"),
            ("link", "set", inside, "up"),
            ("link", "set", "lo", "up"),
            ("route", "add", "default", "via", reserved_host),
        ):
            _ip("-n", namespace, *command)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        service = subprocess.Popen(
            ["ip", "netns", "exec", namespace, sys.executable, "-c", SERVICE, str(port)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert service.stdout is not None and service.stdout.readline().strip() == "ready"
        try:
            yield Neighbour(
                reserved_host,
                on_link_host,
                reserved,
                on_link,
                f"198.51.100.{quad * 4}/30",
                unique_local_host,
                unique_local,
                port,
                service,
            )
        finally:
            service.kill()
            service.wait()
    finally:
        subprocess.run(["ip", "link", "del", outside], check=False, capture_output=True)
        subprocess.run(["ip", "netns", "del", namespace], check=False, capture_output=True)


def host_reaches(address: str, port: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            socket.create_connection((address, port), timeout=2).close()
            return True
        time.sleep(0.2)
    return False
