"""A shared proxy's log, told apart by trial: the client's address, within the span it held it; and
what came of each request, by destination, for the trial's record."""

from envloop.core.destinations import asked
from envloop.environments.docker.egress import tally
from envloop.environments.docker.proxy_ledger import ProxyLedger, Request, Span, parse
from envloop.environments.docker.squid import PUBLIC_HOSTS, squid_config


def line(
    ended: float,
    duration_ms: int,
    client: str,
    url: str,
    status: int,
    result: str,
    how: str,
    error: str = "-",
    server: str = "-",
) -> str:
    return f"{ended:.3f} {duration_ms} {client} GET {url} {status} {result} {how} {error} {server}\n"


def test_a_request_begins_its_logged_time_less_its_duration() -> None:
    found = parse(
        line(
            1000.5,
            1500,
            "172.20.0.3",
            "www.example.zz:443",
            503,
            "NONE_NONE",
            "HIER_NONE",
            "ERR_CANNOT_FORWARD",
        )
    )
    assert found == Request(
        999.0, "172.20.0.3", "www.example.zz:443", failed=True, denied=False, host="www.example.zz", port=443,
        result="unresolved",
    )  # fmt: skip


def test_only_the_proxys_own_failures_count_as_failures() -> None:
    reached = parse(line(10, 5, "a", "http://x.zz/page", 503, "TCP_MISS", "HIER_DIRECT"))
    refused = parse(line(10, 5, "a", "x.zz:443", 403, "TCP_DENIED", "HIER_NONE"))
    assert reached is not None and not reached.failed and reached.destination == "x.zz"
    assert refused is not None and refused.denied and not refused.failed
    assert parse("garbage") is None and parse("x 1 a GET u 200 TCP_MISS HIER_DIRECT - -") is None
    assert parse("10.000 1 a GET u 200 TCP_MISS HIER_DIRECT") is None  # a line of the older format


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
        assert "logformat envloop %ts.%03tu %tr %>a %rm %ru %>Hs %Ss %Sh %err_code %<a" in squid_config(hosts)


# What Squid 5 logged here for each case (tests/test_docker_networks.py checks them against it).
def test_each_request_says_what_came_of_it() -> None:
    cases = {
        "reached": line(1, 8, "a", "registry.zz:443", 200, "TCP_TUNNEL", "HIER_DIRECT", "-", "203.0.113.80"),
        "reached, though the page was not found": line(
            1, 6, "a", "http://registry.zz/x", 404, "TCP_MISS", "HIER_DIRECT", "-", "203.0.113.80"
        ),
        "refused": line(1, 8, "a", "other.zz:443", 403, "TCP_DENIED", "HIER_NONE", "ERR_ACCESS_DENIED"),
        "unresolved": line(
            1, 1, "a", "absent.invalid:443", 500, "NONE_NONE", "HIER_NONE", "ERR_CANNOT_FORWARD"
        ),
        "unresolved, plain": line(
            1, 2, "a", "http://absent.invalid/x", 502, "TCP_MISS", "HIER_NONE", "ERR_READ_ERROR"
        ),
        "unconnected": line(
            1, 0, "a", "http://p:9/", 503, "TCP_MISS", "HIER_DIRECT", "ERR_CONNECT_FAIL", "10.0.0.2"
        ),
        "unconnected, given up": line(
            1, 15013, "a", "http://192.0.2.1/", 0, "TCP_MISS_ABORTED", "HIER_NONE", "ERR_CLIENT_GONE"
        ),
        "other": line(1, 0, "a", "error:invalid-request", 400, "NONE_NONE", "HIER_NONE", "ERR_INVALID_REQ"),
    }
    found = {case: parse(text) for case, text in cases.items()}
    assert {case: request.result for case, request in found.items() if request is not None} == {
        case: case.split(",")[0] for case in cases
    }


def test_a_destination_is_its_host_and_port_whatever_the_request_says_besides() -> None:
    urls = {
        "registry.zz:443": ("registry.zz", 443),
        "http://Registry.ZZ/some/path?q=1": ("registry.zz", 80),
        "http://user:pass@registry.zz:8080/": ("registry.zz", 8080),
        "https://registry.zz/": ("registry.zz", 443),
        "[2001:db8::1]:443": ("2001:db8::1", 443),
        "ftp://files.zz/": ("files.zz", 21),
        "error:invalid-request": ("error:invalid-request", 0),
        "x" * 300 + ".zz:443": ("x" * 253, 443),
    }
    for url, expected in urls.items():
        found = parse(line(1, 0, "a", url, 200, "TCP_MISS", "HIER_DIRECT", "-", "10.0.0.2"))
        assert found is not None and (found.host, found.port) == expected, url


def test_requests_are_counted_by_destination_and_result_in_the_order_first_asked() -> None:
    logged = [
        line(3, 0, "a", "b.zz:443", 500, "NONE_NONE", "HIER_NONE", "ERR_CANNOT_FORWARD"),
        line(1, 0, "a", "a.zz:443", 200, "TCP_TUNNEL", "HIER_DIRECT", "-", "10.0.0.2"),
        line(2, 0, "a", "http://a.zz:443/", 503, "TCP_MISS", "HIER_DIRECT", "ERR_CONNECT_FAIL", "10.0.0.2"),
        line(4, 0, "a", "a.zz:443", 200, "TCP_TUNNEL", "HIER_DIRECT", "-", "10.0.0.2"),
    ]
    requests = [request for request in map(parse, logged) if request is not None]
    assert tally(requests) == [
        asked("a.zz", 443, {"reached": 2, "unconnected": 1}, first=1.0),
        asked("b.zz", 443, {"unresolved": 1}, first=3.0),
    ]
