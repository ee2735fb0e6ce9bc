"""The names public trials look up themselves: a DNS forwarder on the shared public bridge that
keeps a log of every query it forwards.

The observing proxy (squid.py) sees only the traffic that honours the proxy variables; a command
that ignores them still goes out directly, as `public` means, but first looks its host up. A trial
container's resolver is Docker's embedded one (127.0.0.11), and a container given `--dns ADDRESS`
has it forward every name Docker does not answer itself to ADDRESS from the container's own network
namespace. So a main container of a `public` phase is given the shared public bridge's gateway
address (shared_egress.py), where this forwarder listens, and its queries arrive from its address
on that bridge: attributed to the trial as the proxy's log is (proxy_ledger.Span: a trial's address
on the bridge, while it held it; firewall.bind_source keeps any other trial from speaking from it).

Each query is forwarded to the upstream resolvers (the host's own, `ENVLOOP_DNS_UPSTREAM` to name
others) and logged with what came of it (`Answer`). What is forwarded is a query built here from
the client's question (its name, type and class, its id, its RD and CD flags, EDNS 0 and the DO
bit when it asked with EDNS), never the client's bytes: no EDNS version, option, opcode or flag of
a trial's choosing reaches the upstreams, so none can make them fail a lookup the task depends on.
A trial can still make its own lookups fail (a flood the upstreams shed), so a failed lookup counts
against the machine only once `unanswered` has asked again, plainly, after the trial's processes
are gone (egress.py). The queries come from trials, so they are
taken as hostile: the forwarder runs in a thread of its own with its own event loop (a flood never
slows the worker's trials, and it outlives the event loop of the trial that started it), reads
at most `_MOST_QUERY_BYTES` of a query, drops whatever dnspython cannot parse or is not one plain
question, forwards at most `_MOST_IN_FLIGHT` queries at once (`_MOST_IN_FLIGHT_PER_CLIENT` of
one address: a trial that floods it leaves room for the others) and serves at most `_MOST_STREAMS`
TCP connections, each for a few queries; and the log is bounded: at most `_MOST_KEPT_PER_CLIENT`
lookups of one address are kept (a trial that floods it loses its own later lookups, never another
trial's), `_MOST_KEPT` in all (past that the oldest go first: most likely of trials already
ended). A lookup is kept while a trial may still ask for it (`forget_before`, from the start of
the earliest trial still running).
"""

import asyncio
import contextlib
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from typing import Literal, NamedTuple, cast

import dns.asyncquery
import dns.exception
import dns.flags
import dns.message
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype

from envloop.environments.docker.proxy_ledger import Span
from envloop.environments.forbidden_ranges import resolvers
from envloop.errors import UserError
from envloop.setting_addresses import upstream_address
from envloop.settings import settings

PORT = 53
Answer = Literal["addresses", "no-addresses", "no-such-name", "failed", "timeout"]
"""What came of one query: the resolvers answered with addresses, or without any (the name exists,
with no address of the type asked for), or said the name does not exist (NXDOMAIN), or failed
(SERVFAIL, REFUSED, any other error), or none answered in time."""
ADDRESS_TYPES = ("A", "AAAA")
_MOST_QUERY_BYTES = 4096
_MOST_IN_FLIGHT = 256
_MOST_IN_FLIGHT_PER_CLIENT = 32
_MOST_STREAMS = 64
_QUERIES_PER_STREAM = 16
_STREAM_IDLE_SEC = 5.0
_UPSTREAM_SEC = 3.0
"""The longest the upstreams are waited for, all of them together: under the 4 s Docker's
embedded resolver waits, so a container hears SERVFAIL rather than nothing."""
_CONFIRM_ATTEMPTS = 3
_CONFIRM_SEC = 1.0
"""How often, and how far apart, `unanswered` asks again for a name (each attempt waits as long):
a resolver shedding a flood answers again within a second or two."""
_MOST_KEPT = 50_000
_MOST_KEPT_PER_CLIENT = 5_000


class Lookup(NamedTuple):
    """One query the forwarder answered."""

    at: float
    """When it arrived (seconds since the epoch); it is kept once answered (a query still being
    forwarded when a trial's record is made is not on it)."""
    client: str
    """The address it came from on the bridge."""
    name: str
    """The name asked for, in lower case, without the final dot."""
    kind: str
    """The record type asked for (`A`, `AAAA`, `MX`, …), after its class when that is not IN
    (`CH TXT`): only an `A` or `AAAA` lookup is of an address."""
    answer: Answer


Upstreams = Callable[[], list[tuple[str, int]]]
"""Where to forward a query now (address and port each): asked for every query, so a change of
the setting holds from the next one."""


def upstreams() -> list[tuple[str, int]]:
    """Where lookups are forwarded: `ENVLOOP_DNS_UPSTREAM`, else the host's resolvers (loopback
    ones included: the forwarder runs on the host), else those Docker gives a container then."""
    chosen = settings().dns_upstream
    if chosen:
        return [upstream_address(entry) for entry in chosen]
    found = [*resolvers(4, loopback=True), *resolvers(6, loopback=True)]
    return [(address, PORT) for address in found or ["8.8.8.8", "8.8.4.4"]]


class DnsObserver:
    """The forwarder listening at `address` (port 53, UDP and TCP), forwarding to `upstreams`.
    `start` and `close` block while the thread starts or ends; the log is read from any thread."""

    def __init__(self, address: str, upstreams: Upstreams, port: int = PORT) -> None:
        self.address = address
        self.port = port
        self._upstreams = upstreams
        self._lock = threading.Lock()
        self._kept: deque[Lookup] = deque()
        self._per_client: Counter[str] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._in_flight: Counter[str] = Counter()
        """Queries being forwarded, by client (read and changed on the forwarder's thread alone)."""
        self._streams = 0

    def start(self) -> None:
        """Listen and serve in a thread of its own; OSError when the address cannot be bound."""
        ready = threading.Event()
        failed: list[OSError] = []
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._serve(ready, failed)), name="envloop-dns-observer", daemon=True
        )
        self._thread.start()
        ready.wait()
        if failed:
            self._thread.join()
            raise failed[0]

    def close(self) -> None:
        """Stop listening (lookups already kept stay readable)."""
        loop, stop, thread = self._loop, self._stop, self._thread
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # its loop already ended
                loop.call_soon_threadsafe(stop.set)
        if thread is not None:
            thread.join(timeout=10)

    async def _serve(self, ready: threading.Event, failed: list[OSError]) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        try:
            datagrams, _ = await self._loop.create_datagram_endpoint(
                lambda: _Datagrams(self), local_addr=(self.address, self.port)
            )
            try:
                streams = await asyncio.start_server(self._stream, self.address, self.port)
            except OSError:
                datagrams.close()
                raise
        except OSError as exc:
            failed.append(exc)
            ready.set()
            return
        ready.set()
        async with streams:
            await self._stop.wait()
        datagrams.close()

    def lookups(self, spans: Iterable[Span]) -> list[Lookup]:
        """The lookups made from one of `spans` (its address, within its time), in order."""
        spans = list(spans)
        with self._lock:
            return [
                lookup
                for lookup in self._kept
                if any(
                    lookup.client == span.client
                    and span.since <= lookup.at
                    and (span.until is None or lookup.at <= span.until)
                    for span in spans
                )
            ]

    def forget_before(self, moment: float) -> None:
        """Drop the lookups made before `moment` (no trial still asks about them)."""
        with self._lock:
            while self._kept and self._kept[0].at < moment:
                self._per_client[self._kept.popleft().client] -= 1
            self._per_client = +self._per_client

    def _keep(self, lookup: Lookup) -> None:
        with self._lock:
            if self._per_client[lookup.client] >= _MOST_KEPT_PER_CLIENT:
                return
            if len(self._kept) >= _MOST_KEPT:
                self._per_client[self._kept.popleft().client] -= 1
            self._kept.append(lookup)
            self._per_client[lookup.client] += 1

    async def answer(self, wire: bytes, client: str, stream: bool) -> bytes | None:
        """The answer to the query `wire` from `client`, or None to drop it (malformed, not a plain
        question, or too many already in flight)."""
        arrived = time.time()
        query = _question(wire)
        busy = self._in_flight[client] >= _MOST_IN_FLIGHT_PER_CLIENT
        if query is None or busy or self._in_flight.total() >= _MOST_IN_FLIGHT:
            return None
        self._in_flight[client] += 1
        try:
            response = await self._forward(_plain(query))
        finally:
            self._in_flight[client] -= 1
            if not self._in_flight[client]:
                del self._in_flight[client]
        question = query.question[0]
        name = question.name.to_text(omit_final_dot=True).lower()
        kind = dns.rdatatype.to_text(question.rdtype)
        if question.rdclass != dns.rdataclass.IN:
            kind = f"{dns.rdataclass.to_text(question.rdclass)} {kind}"
        self._keep(Lookup(arrived, client, name, kind, _answer(response)))
        if response is None:
            response = dns.message.make_response(query)
            response.set_rcode(dns.rcode.SERVFAIL)
        return _fitted(query, response, stream)

    async def _forward(self, query: dns.message.Message) -> dns.message.Message | None:
        """The first upstream's answer within `_UPSTREAM_SEC` (over UDP, again over TCP when it
        was cut: whatever the client used, `_fitted` cuts it to what it takes); None when none
        answered."""
        deadline = time.monotonic() + _UPSTREAM_SEC
        try:
            upstreams = self._upstreams()
        except UserError:  # the setting was changed to something unreadable: nowhere to ask
            return None
        for host, port in upstreams:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            with contextlib.suppress(dns.exception.DNSException, OSError, ValueError, EOFError):
                response, _ = await dns.asyncquery.udp_with_fallback(
                    query, host, timeout=left, port=port, ignore_unexpected=True
                )
                return response
        return None

    async def unanswered(self, names: Iterable[str]) -> set[str]:
        """Of `names`, those the upstreams still fail to give an answer for (SERVFAIL or any other
        error, or silence) when asked for their `A` records plainly now, a few times a second
        apart. Run on the caller's event loop, not the forwarder's (which a trial may have kept
        busy): each name waits at most `_CONFIRM_ATTEMPTS` * `_CONFIRM_SEC`, all at once."""
        names = sorted(set(names))
        answered = await asyncio.gather(*(self._answers_now(name) for name in names))
        return {name for name, ok in zip(names, answered, strict=True) if not ok}

    async def _answers_now(self, name: str) -> bool:
        try:
            query = dns.message.make_query(name, "A")
        except (dns.exception.DNSException, ValueError):  # no name to ask for: no failure to confirm
            return True
        for attempt in range(_CONFIRM_ATTEMPTS):
            started = time.monotonic()
            try:
                upstreams = self._upstreams()
            except UserError:  # the setting was changed to something unreadable: nowhere to ask
                upstreams = []
            if not upstreams:
                return False
            host, port = upstreams[attempt % len(upstreams)]
            with contextlib.suppress(dns.exception.DNSException, OSError, ValueError, EOFError):
                response, _ = await dns.asyncquery.udp_with_fallback(
                    query, host, timeout=_CONFIRM_SEC, port=port, ignore_unexpected=True
                )
                if _answer(response) not in ("failed", "timeout"):
                    return True
            if attempt + 1 < _CONFIRM_ATTEMPTS:
                await asyncio.sleep(max(0.0, _CONFIRM_SEC - (time.monotonic() - started)))
        return False

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One TCP client: a few length-prefixed queries, each answered before the next is read."""
        peer = writer.get_extra_info("peername")
        self._streams += 1
        try:
            if self._streams > _MOST_STREAMS or not peer:
                return
            for _ in range(_QUERIES_PER_STREAM):
                size = int.from_bytes(await asyncio.wait_for(reader.readexactly(2), _STREAM_IDLE_SEC), "big")
                if size > _MOST_QUERY_BYTES:
                    return
                wire = await asyncio.wait_for(reader.readexactly(size), _STREAM_IDLE_SEC)
                answer = await self.answer(wire, str(peer[0]), stream=True)
                if answer is None:
                    return
                writer.write(len(answer).to_bytes(2, "big") + answer)
                await asyncio.wait_for(writer.drain(), _STREAM_IDLE_SEC)
        except (OSError, EOFError, TimeoutError, asyncio.IncompleteReadError):
            return
        finally:
            self._streams -= 1
            writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                await asyncio.wait_for(writer.wait_closed(), _STREAM_IDLE_SEC)


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, observer: DnsObserver) -> None:
        self._observer = observer
        self._transport: asyncio.DatagramTransport | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.DatagramTransport, transport)  # what a datagram endpoint makes

    def datagram_received(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        if len(data) > _MOST_QUERY_BYTES:
            return
        task = asyncio.ensure_future(self._reply(data, addr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reply(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        answer = await self._observer.answer(data, str(addr[0]), stream=False)
        if answer is not None and self._transport is not None and not self._transport.is_closing():
            self._transport.sendto(answer, addr)


def _question(wire: bytes) -> dns.message.Message | None:
    """The query in `wire` when it is one plain question (a standard query, not a response),
    None for anything else."""
    if len(wire) > _MOST_QUERY_BYTES:
        return None
    try:
        query = dns.message.from_wire(wire)
    except (dns.exception.DNSException, ValueError, EOFError, UnicodeError):
        return None
    if query.flags & dns.flags.QR or query.opcode() != dns.opcode.QUERY or len(query.question) != 1:
        return None
    return query


def _plain(query: dns.message.Message) -> dns.message.Message:
    """The query forwarded for `query`: its question, id and RD and CD flags, with EDNS 0 (and
    the DO bit) when it used EDNS at all; nothing else of the client's."""
    question = query.question[0]
    edns = query.edns >= 0
    return dns.message.make_query(
        question.name,
        question.rdtype,
        question.rdclass,
        use_edns=0 if edns else None,
        want_dnssec=edns and bool(query.ednsflags & dns.flags.DO),
        id=query.id,
        flags=query.flags & (dns.flags.RD | dns.flags.CD),
    )


def _answer(response: dns.message.Message | None) -> Answer:
    if response is None:
        return "timeout"
    code = response.rcode()
    if code == dns.rcode.NXDOMAIN:
        return "no-such-name"
    if code != dns.rcode.NOERROR:
        return "failed"
    addressed = any(dns.rdatatype.to_text(rrset.rdtype) in ADDRESS_TYPES for rrset in response.answer)
    return "addresses" if addressed else "no-addresses"


def _fitted(query: dns.message.Message, response: dns.message.Message, stream: bool) -> bytes | None:
    """`response` as the client may take it: over UDP, within the size its query allows (else an
    empty answer marked truncated, so it asks again over TCP)."""
    limit = 65535 if stream else max(512, query.payload if query.edns >= 0 else 512)
    try:
        wire = response.to_wire(max_size=65535)
    except dns.exception.DNSException:
        return None
    if len(wire) <= limit:
        return wire
    cut = dns.message.make_response(query)
    cut.set_rcode(response.rcode())
    cut.flags |= dns.flags.TC
    return cut.to_wire()
