"""A resolver of the tests' own, on loopback: this machine has no internet, so the names a test
expects to resolve are answered here (`ENVLOOP_DNS_UPSTREAM` points the DNS observer at it).

Names in `addresses` get their address; `FAILING` gets SERVFAIL; `SILENT` is never answered;
every other name does not exist (NXDOMAIN).
"""

import contextlib
import socket
import threading
from collections.abc import Iterator

import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset

FAILING = "servfail.envloop-dns.zz"
SILENT = "silent.envloop-dns.zz"


class StubResolver:
    def __init__(self, addresses: dict[str, str]) -> None:
        self.addresses = {name.lower().rstrip("."): address for name, address in addresses.items()}
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.asked: list[str] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def upstream(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while True:
            try:
                wire, peer = self.sock.recvfrom(4096)
            except OSError:
                return
            with contextlib.suppress(Exception):
                query = dns.message.from_wire(wire)
                question = query.question[0]
                name = question.name.to_text(omit_final_dot=True).lower()
                self.asked.append(name)
                if name == SILENT:
                    continue
                response = dns.message.make_response(query)
                if name == FAILING:
                    response.set_rcode(dns.rcode.SERVFAIL)
                elif name not in self.addresses:
                    response.set_rcode(dns.rcode.NXDOMAIN)
                elif question.rdtype == dns.rdatatype.A:
                    response.answer.append(
                        dns.rrset.from_text(question.name, 60, "IN", "A", self.addresses[name])
                    )
                self.sock.sendto(response.to_wire(), peer)


@contextlib.contextmanager
def stub_resolver(addresses: dict[str, str]) -> Iterator[StubResolver]:
    stub = StubResolver(addresses)
    stub._thread.start()
    try:
        yield stub
    finally:
        stub.sock.close()
