"""A shared proxy's log, told apart by trial: the client's address, within the span it held it."""

from envloop.environments.docker.proxy_ledger import ProxyLedger, Request, Span, parse
from envloop.environments.docker.squid import PUBLIC_HOSTS, squid_config


def line(ended: float, duration_ms: int, client: str, url: str, status: int, result: str, how: str) -> str:
    return f"{ended:.3f} {duration_ms} {client} GET {url} {status} {result} {how}\n"


def test_a_request_begins_its_logged_time_less_its_duration() -> None:
    found = parse(line(1000.5, 1500, "172.20.0.3", "www.example.zz:443", 503, "NONE_NONE", "HIER_NONE"))
    assert found == Request(999.0, "172.20.0.3", "www.example.zz:443", failed=True, denied=False)


def test_only_the_proxys_own_failures_count_as_failures() -> None:
    reached = parse(line(10, 5, "a", "http://x.zz/page", 503, "TCP_MISS", "HIER_DIRECT"))
    refused = parse(line(10, 5, "a", "x.zz:443", 403, "TCP_DENIED", "HIER_NONE"))
    assert reached is not None and not reached.failed and reached.destination == "x.zz"
    assert refused is not None and refused.denied and not refused.failed
    assert parse("garbage") is None and parse("x 1 a GET u 200 TCP_MISS HIER_DIRECT") is None


def test_an_address_used_again_by_a_later_container_keeps_each_trials_requests_apart() -> None:
    ledger = ProxyLedger()
    ledger.take(
        (
            line(105, 1000, "172.20.0.2", "first.zz:443", 503, "NONE", "HIER_NONE")  # began at 104
            + line(170, 65_000, "172.20.0.2", "hung.zz:443", 503, "NONE", "HIER_NONE")  # began at 105
            + line(130, 10, "172.20.0.2", "second.zz:443", 503, "NONE", "HIER_NONE")
            + line(131, 10, "172.20.0.3", "other.zz:443", 503, "NONE", "HIER_NONE")
        ).encode()
    )
    first = [Span("172.20.0.2", 100.0, 110.0)]
    second = [Span("172.20.0.2", 120.0, None)]
    assert [r.destination for r in ledger.requests(first)] == ["first.zz:443", "hung.zz:443"]
    assert [r.destination for r in ledger.requests(second)] == ["second.zz:443"]


def test_a_line_still_being_written_waits_for_the_next_reading() -> None:
    ledger = ProxyLedger()
    whole = line(10, 0, "a", "one.zz:443", 200, "TCP_TUNNEL", "HIER_DIRECT").encode()
    ledger.take(whole + b"11.000 0 a GET tw")
    assert len(ledger.requests([Span("a", 0, None)])) == 1
    ledger.take(whole + line(11, 0, "a", "two.zz:443", 200, "TCP_TUNNEL", "HIER_DIRECT").encode())
    assert [r.destination for r in ledger.requests([Span("a", 0, None)])] == ["one.zz:443", "two.zz:443"]
    ledger.forget_before(10.5)
    assert [r.destination for r in ledger.requests([Span("a", 0, None)])] == ["two.zz:443"]


def test_the_proxy_logs_in_the_format_the_ledger_reads() -> None:
    for hosts in (PUBLIC_HOSTS, ("example.com", "*.example.org")):
        assert "logformat envloop %ts.%03tu %tr %>a %rm %ru %>Hs %Ss %Sh" in squid_config(hosts)
