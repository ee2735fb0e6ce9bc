"""A resolver of the tests' own, on loopback: this machine has no internet, so the names a test
expects to resolve are answered here (`ENVLOOP_DNS_UPSTREAM` points the DNS observer at it).

Names in `addresses` get their address; `FAILING` gets SERVFAIL; `SILENT` is never answered;
every other name does not exist (NXDOMAIN). It is as strict as a real resolver may be with odd
queries (`refusal`): a class other than IN is REFUSED, an EDNS version other than 0 gets BADVERS,
a header flag a stub never sets or an EDNS option it does not know gets FORMERR. With `shed` set,
it sheds a flood as a rate-limited resolver does: past `shed` queries within the last second
(answered or not), it answers none.
"""

import contextlib
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

FAILING = "servfail.envloop-dns.zz"
SILENT = "silent.envloop-dns.zz"
_STUB_FLAGS = dns.flags.RD | dns.flags.AD | dns.flags.CD
_KNOWN_OPTIONS = {dns.edns.OptionType.COOKIE, dns.edns.OptionType.ECS, dns.edns.OptionType.PADDING}


class StubResolver:
    def __init__(self, addresses: dict[str, str], shed: int | None = None) -> None:
        self.addresses = {name.lower().rstrip("."): address for name, address in addresses.items()}
        self.shed = shed
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.asked: list[str] = []
        self.shed_names: list[str] = []
        self._recent: deque[float] = deque()
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
                if name == SILENT or self._shedding():
                    if name != SILENT:
                        self.shed_names.append(name)
                    continue
                self.sock.sendto(self._response(query, name).to_wire(), peer)

    def _shedding(self) -> bool:
        now = time.monotonic()
        self._recent.append(now)
        while self._recent and self._recent[0] < now - 1:
            self._recent.popleft()
        return self.shed is not None and len(self._recent) > self.shed

    def _response(self, query: dns.message.Message, name: str) -> dns.message.Message:
        question = query.question[0]
        response = dns.message.make_response(query)
        refusal = _refusal(query)
        if refusal is not None:
            if refusal == dns.rcode.BADVERS:
                response.use_edns(0)
            response.set_rcode(refusal)
        elif name == FAILING:
            response.set_rcode(dns.rcode.SERVFAIL)
        elif name not in self.addresses:
            response.set_rcode(dns.rcode.NXDOMAIN)
        elif question.rdtype == dns.rdatatype.A:
            response.answer.append(dns.rrset.from_text(question.name, 60, "IN", "A", self.addresses[name]))
        return response


def _refusal(query: dns.message.Message) -> dns.rcode.Rcode | None:
    """What a strict resolver answers an odd query with (None for a plain one)."""
    if query.question[0].rdclass != dns.rdataclass.IN:
        return dns.rcode.REFUSED
    if query.edns > 0:
        return dns.rcode.BADVERS
    if query.flags & ~_STUB_FLAGS & 0x7FFF or query.ednsflags & 0x7FFF:  # AA, TC, Z; EDNS Z bits
        return dns.rcode.FORMERR
    if any(option.otype not in _KNOWN_OPTIONS for option in query.options):
        return dns.rcode.FORMERR
    return None


@contextlib.contextmanager
def stub_resolver(addresses: dict[str, str], shed: int | None = None) -> Iterator[StubResolver]:
    stub = StubResolver(addresses, shed)
    stub._thread.start()
    try:
        yield stub
    finally:
        stub.sock.close()
