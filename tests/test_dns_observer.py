"""The DNS observer as a forwarder on loopback: what it answers, what it logs, and what it drops.

Queries here come from loopback, a trial's come from its address on the shared public bridge
(test_docker_dns_observer.py); both are sent by real sockets to a real forwarder and resolver.
"""

import asyncio
import socket
import struct
import time
from collections.abc import Iterator

import dns.edns
import dns.flags
import dns.message
import dns.query
import dns.rcode
import pytest

from envloop.core.destinations import record
from envloop.environments.docker.dns_observer import DnsObserver, Lookup
from envloop.environments.docker.egress import looked_up
from envloop.environments.docker.proxy_ledger import Span
from tests.dns_upstream import FAILING, SILENT, StubResolver, stub_resolver
from tests.ports import free_port

NAME = "files.envloop-dns.zz"


@pytest.fixture
def upstream() -> Iterator[StubResolver]:
    with stub_resolver({NAME: "198.51.100.7"}) as stub:
        yield stub


@pytest.fixture
def observer(upstream: StubResolver) -> Iterator[DnsObserver]:
    found = DnsObserver("127.0.0.1", lambda: [("127.0.0.1", upstream.port)], port=free_port(datagrams=True))
    found.start()
    yield found
    found.close()


def ask(
    observer: DnsObserver, name: str, kind: str = "A", tcp: bool = False, source: str | None = None
) -> dns.message.Message:
    query = dns.message.make_query(name, kind)
    send = dns.query.tcp if tcp else dns.query.udp
    return send(query, observer.address, timeout=6, port=observer.port, source=source)


def everything(observer: DnsObserver) -> list[Lookup]:
    return observer.lookups([Span("127.0.0.1", 0, None)])


def test_each_query_is_answered_and_logged_with_what_came_of_it(observer: DnsObserver) -> None:
    assert ask(observer, NAME).answer[0][0].to_text() == "198.51.100.7"
    assert ask(observer, NAME, "AAAA").rcode() == dns.rcode.NOERROR
    assert ask(observer, "nowhere.envloop-dns.zz", tcp=True).rcode() == dns.rcode.NXDOMAIN
    assert ask(observer, FAILING).rcode() == dns.rcode.SERVFAIL
    started = time.monotonic()
    assert ask(observer, SILENT).rcode() == dns.rcode.SERVFAIL  # before Docker's resolver gives up
    assert time.monotonic() - started < 4
    assert [(one.client, one.name, one.kind, one.answer) for one in everything(observer)] == [
        ("127.0.0.1", NAME, "A", "addresses"),
        ("127.0.0.1", NAME, "AAAA", "no-addresses"),
        ("127.0.0.1", "nowhere.envloop-dns.zz", "A", "no-such-name"),
        ("127.0.0.1", FAILING, "A", "failed"),
        ("127.0.0.1", SILENT, "A", "timeout"),
    ]


def odd(query: dns.message.Message, flags: int = 0) -> dns.message.Message:
    query.flags |= flags
    return query


def test_an_odd_query_reaches_the_upstreams_only_as_a_plain_one_and_logs_its_class(
    observer: DnsObserver, upstream: StubResolver
) -> None:
    # The stub refuses or rejects each of these as it came (tests/dns_upstream.py): a trial's odd
    # query for a name the task depends on would have logged it as failed.
    odd_ones = [
        dns.message.make_query(NAME, "A", use_edns=1),  # BADVERS
        dns.message.make_query(NAME, "A", use_edns=0, ednsflags=0x0001),  # an EDNS Z bit
        dns.message.make_query(
            NAME, "A", use_edns=0, options=[dns.edns.GenericOption(dns.edns.OptionType.make(65001), b"x")]
        ),
        odd(dns.message.make_query(NAME, "A"), dns.flags.AA),
        odd(dns.message.make_query(NAME, "A"), 0x0040),  # the header's Z bit
        dns.message.make_query(NAME, "A", want_dnssec=True),  # the DO bit, kept: harmless
    ]
    for query in odd_ones:
        answered = dns.query.udp(query, observer.address, timeout=6, port=observer.port)
        assert answered.id == query.id and answered.answer[0][0].to_text() == "198.51.100.7"
    chaos = dns.message.make_query(NAME, "A", rdclass="CH")
    assert dns.query.udp(chaos, observer.address, timeout=6, port=observer.port).rcode() == dns.rcode.REFUSED
    assert [(one.kind, one.answer) for one in everything(observer)] == [
        *[("A", "addresses")] * len(odd_ones),
        ("CH A", "failed"),  # no lookup of an address: never on the record, never the machine's
    ]


def test_a_failed_lookup_is_confirmed_by_asking_again_plainly(observer: DnsObserver) -> None:
    started = time.monotonic()
    names = [NAME, "nowhere.envloop-dns.zz", FAILING, SILENT]
    assert asyncio.run(observer.unanswered(names)) == {FAILING, SILENT}
    assert time.monotonic() - started < 4  # a few attempts a second apart, every name at once


def test_a_failure_a_flood_brought_about_is_not_confirmed_once_the_flood_is_over() -> None:
    with stub_resolver({NAME: "198.51.100.7"}, shed=5) as shedding:
        observer = DnsObserver(
            "127.0.0.1", lambda: [("127.0.0.1", shedding.port)], port=free_port(datagrams=True)
        )
        observer.start()
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                for number in range(20):
                    query = dns.message.make_query(f"flood-{number}.envloop-dns.zz", "A")
                    sock.sendto(query.to_wire(), (observer.address, observer.port))
            assert ask(observer, NAME).rcode() == dns.rcode.SERVFAIL  # the flood's doing
            # Logged as each is answered: the flood's last may time out after this one.
            assert [one[2:] for one in everything(observer) if one[2] == NAME] == [(NAME, "A", "timeout")]
            assert NAME in shedding.shed_names
            assert asyncio.run(observer.unanswered([NAME])) == set()
        finally:
            observer.close()


def test_a_lookup_counts_only_within_its_clients_span(observer: DnsObserver) -> None:
    ask(observer, NAME)
    now = time.time()
    assert observer.lookups([Span("127.0.0.1", now, None)]) == []
    assert observer.lookups([Span("127.0.0.2", 0, None)]) == []
    observer.forget_before(now)
    assert everything(observer) == []


def test_malformed_forged_and_oversized_queries_are_dropped_and_the_forwarder_keeps_answering(
    observer: DnsObserver, upstream: StubResolver
) -> None:
    forged = dns.message.make_response(dns.message.make_query(NAME, "A"))  # a response, not a query
    two = dns.message.make_query(NAME, "A")
    two.question.append(dns.message.make_query("other.envloop-dns.zz", "A").question[0])
    hostile = [
        b"",
        b"\x00",
        b"\xff" * 40,
        forged.to_wire(),
        two.to_wire(),
        dns.message.make_query(NAME, "A").to_wire() + b"\x00" * 70_000,
    ]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(0.5)
        for wire in hostile[:-1]:
            sock.sendto(wire, (observer.address, observer.port))
        for wire in hostile[:-1]:
            with pytest.raises(TimeoutError):
                sock.recvfrom(4096)
                raise AssertionError(f"answered {wire[:20]!r}")
    with socket.create_connection((observer.address, observer.port), timeout=3) as stream:
        # A length past the bound and bytes that never come: the connection is dropped, not held.
        stream.sendall(struct.pack("!H", 65535) + hostile[-1][:100])
        assert stream.recv(10) == b""
    with socket.create_connection((observer.address, observer.port), timeout=10) as stream:
        stream.sendall(b"\x00\x40" + b"\x00" * 10)  # promises 64 bytes, sends 10, then waits
        assert stream.recv(10) == b""
    assert ask(observer, NAME).answer[0][0].to_text() == "198.51.100.7"
    assert [one.name for one in everything(observer)] == [NAME]
    assert upstream.asked == [NAME]


def test_a_flood_of_queries_never_stalls_another_clients(observer: DnsObserver) -> None:
    # The flood comes from 127.0.0.1 and asks for a name never answered, holding its queries in
    # flight; another address on loopback stands for another trial.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for number in range(2000):
            sock.sendto(dns.message.make_query(SILENT, "A").to_wire(), (observer.address, observer.port))
            if number % 100 == 0:
                sock.sendto(b"\xff" * 300, (observer.address, observer.port))
    started = time.monotonic()
    answered = ask(observer, NAME, tcp=True, source="127.0.0.2")
    assert answered.answer[0][0].to_text() == "198.51.100.7"
    assert time.monotonic() - started < 5
    assert not answered.flags & dns.flags.TC


@pytest.mark.slow  # five thousand queries, one after another
def test_one_client_keeps_at_most_its_share_of_the_log_and_another_still_its_own(
    observer: DnsObserver,
) -> None:
    share = 5_000
    query = dns.message.make_query(NAME, "A")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(5)
        for _ in range(share + 50):  # one at a time: each answered before the next is sent
            sock.sendto(query.to_wire(), (observer.address, observer.port))
            sock.recvfrom(4096)
    ask(observer, "other.envloop-dns.zz", source="127.0.0.2")
    assert len(everything(observer)) == share
    assert [one.name for one in observer.lookups([Span("127.0.0.2", 0, None)])] == ["other.envloop-dns.zz"]


def test_a_names_lookups_on_the_record_read_as_whether_it_resolved() -> None:
    # No IPv6 address for a name with an IPv4 one is no failure; a name the proxy was asked for
    # is on the record with what the proxy saw, not again as a lookup.
    lookups = [
        Lookup(1.0, "10.0.0.2", "both.example.net", "A", "addresses"),
        Lookup(1.1, "10.0.0.2", "both.example.net", "AAAA", "no-addresses"),
        Lookup(2.0, "10.0.0.2", "none.example.net", "AAAA", "no-addresses"),
        Lookup(2.1, "10.0.0.2", "none.example.net", "A", "no-such-name"),
        Lookup(3.0, "10.0.0.2", "down.example.net", "A", "timeout"),
        Lookup(3.1, "10.0.0.2", "down.example.net", "A", "failed"),
        Lookup(4.0, "10.0.0.2", "proxied.example.net", "A", "addresses"),
    ]
    kept = record(looked_up(lookups, asked_proxy={"proxied.example.net"}))
    assert [(one.label(), one.summary()) for one in kept.listed] == [
        ("both.example.net", "2 direct lookups: 2 resolved"),
        ("none.example.net", "2 direct lookups: 2 unresolved"),
        ("down.example.net", "2 direct lookups: 2 unanswered"),
    ]
    assert [one.host for one in kept.failed()] == ["none.example.net", "down.example.net"]
