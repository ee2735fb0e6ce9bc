"""The destinations a trial contacted through its proxy: bounded, secrets masked in their hosts, kept
with the outcome and shown by `el trial get` (human and JSON), the API's trial and the console's
trial page; lists leave them out. The docker tests (test_docker_networks.py,
test_docker_shared_egress.py) record them from real trials."""

from pathlib import Path

import pytest

from envloop.core.destinations import Destination, asked, record
from envloop.core.trial import TrialOutcome
from envloop.services.context import Context
from tests.api_server import Server
from tests.recorded_trials import recorded_job

SECRET = "Sk-Dest-Secret-91c4"


def to(host: str, port: int = 443, **results: int) -> Destination:
    return Destination(host=host, port=port, requests=sum(results.values()), results=results)


def test_beyond_the_bound_the_failed_and_the_most_asked_are_listed_and_the_rest_counted() -> None:
    many = [to(f"h{n}.zz", reached=1) for n in range(5)]
    found = record([*many, to("busy.zz", reached=9), to("gone.zz", unresolved=1)], limit=3)
    assert [one.host for one in found.listed] == ["h0.zz", "busy.zz", "gone.zz"]
    assert (found.more_destinations, found.more_requests) == (4, 4)
    assert [one.host for one in found.failed()] == ["gone.zz"]


def test_a_destination_two_environments_asked_for_is_counted_once() -> None:
    found = record([to("a.zz", reached=1), to("b.zz", refused=2), to("a.zz", reached=2, unconnected=1)])
    assert found.listed == [to("a.zz", reached=3, unconnected=1), to("b.zz", refused=2)]


def test_the_destinations_of_several_environments_are_listed_in_the_order_first_asked_for() -> None:
    # A separate verifier is torn down (and counted) before the agent's environment is.
    verifier = [
        asked("v.zz", 443, {"reached": 1}, first=20.0),
        asked("a.zz", 443, {"reached": 1}, first=21.0),
    ]
    agent = [asked("a.zz", 443, {"refused": 1}, first=10.0), asked("late.zz", 80, {"reached": 1}, first=30.0)]
    found = record([*verifier, *agent])
    assert [(one.label(), one.first_asked) for one in found.listed] == [
        ("a.zz:443", 10.0), ("v.zz:443", 20.0), ("late.zz:80", 30.0),
    ]  # fmt: skip
    assert found.listed[0].results == {"reached": 1, "refused": 1}


def test_shown_names_every_failed_destination_then_the_first_others() -> None:
    found = record([*(to(f"h{n}.zz", reached=1) for n in range(30)), to("gone.zz", unresolved=1)])
    shown = found.shown(5)
    assert [one.host for one in shown] == ["h0.zz", "h1.zz", "h2.zz", "h3.zz", "gone.zz"]
    assert found.unshown(5) == 26


def _job_with_destinations(ctx: Context, tmp_path: Path) -> dict[str, str]:
    """A job of two tasks: `a` contacted a reachable host, a host whose name holds a secret (in
    lower case, as a proxy logs names) and a refused one; `b` was not observed. Trial IDs by task."""
    contacted = record(
        [
            to("registry.zz", reached=2),
            to(f"{SECRET.lower()}.leak.zz", 80, unresolved=1),
            to("other.zz", refused=1),
            to(f"direct-{SECRET.lower()}.zz", 0, resolved=2),
        ]
    )

    def outcome_of(task: str) -> TrialOutcome:
        return TrialOutcome(status="completed", reward=1.0, destinations=contacted if task == "a" else None)

    return recorded_job(ctx, tmp_path, SECRET, outcome_of)[1]


@pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)
def test_the_destinations_are_kept_masked_and_shown_with_the_trial(
    ctx: Context, server: Server, tmp_path: Path
) -> None:
    ids = _job_with_destinations(ctx, tmp_path)
    expected = {
        "listed": [
            {"host": "registry.zz", "port": 443, "requests": 2, "results": {"reached": 2}},
            {"host": "***.leak.zz", "port": 80, "requests": 1, "results": {"unresolved": 1}},
            {"host": "other.zz", "port": 443, "requests": 1, "results": {"refused": 1}},
            {"host": "direct-***.zz", "port": 0, "requests": 2, "results": {"resolved": 2}},
        ],
        "more_destinations": 0,
        "more_requests": 0,
    }
    assert server.el.ok("trial", "get", ids["a"], "--json").json()["destinations"] == expected
    assert server.el.ok("trial", "get", ids["b"], "--json").json()["destinations"] is None
    text = server.el.ok("trial", "get", ids["a"]).stdout
    assert "destination registry.zz:443: 2 requests: 2 reached" in text
    assert "destination ***.leak.zz:80: 1 request: 1 unresolved" in text
    assert "destination other.zz:443: 1 request: 1 refused" in text
    assert "destination direct-***.zz: 2 direct lookups: 2 resolved" in text  # looked up, not proxied
    assert "destination" not in server.el.ok("trial", "get", ids["b"]).stdout
    job_id = server.el.ok("trial", "get", ids["a"], "--json").json()["job_id"]
    listed = server.el.ok("trial", "list", "--job", job_id, "--json").json()
    assert [trial["destinations"] for trial in listed] == [None, None]  # one trial's view alone

    with server.http() as http:
        assert http.get(f"/v1/trials/{ids['a']}").json()["destinations"] == expected
        page = http.get(f"/trials/{ids['a']}").text
        quiet = http.get(f"/trials/{ids['b']}").text
    assert "Destinations" in page and "<code>***.leak.zz:80</code>: 1 request: 1 unresolved" in page
    assert "<code>direct-***.zz</code>: 2 direct lookups: 2 resolved" in page
    assert SECRET.lower() not in page.lower() and "Destinations" not in quiet
