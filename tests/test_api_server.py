"""`el serve`: the real server on a loopback port, its keys, its OpenAPI document, its workers."""

import contextlib
import json
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from envloop.api.openapi import render
from envloop.cli.serve import SHUTDOWN_GRACE_SEC
from envloop.client import ServerError
from envloop.services.jobs import JobRequest
from envloop.services.profiles import read_profile_file
from tests.api_server import Server, start_server
from tests.conftest import REPO, El, make_task, process_alive, write_profile
from tests.pg import BACKENDS
from tests.ports import free_port

OPENAPI_FILE = REPO / "openapi.json"


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_health_needs_no_key_and_every_other_endpoint_needs_a_valid_one(server: Server) -> None:
    with server.http(key="") as anonymous:
        assert anonymous.get("/v1/health").json()["status"] == "ok"
        for path in ("/v1/jobs", "/v1/datasets", "/v1/profiles", "/v1/runners", "/v1/keys"):
            response = anonymous.get(path)
            assert response.status_code == 401, path
            assert response.headers["www-authenticate"] == "Bearer"
    with server.http(key="elk_not-a-key") as wrong:
        assert wrong.get("/v1/jobs").status_code == 401
    with server.http() as keyed:
        assert keyed.get("/v1/jobs").json() == []


def test_a_revoked_key_stops_working_at_once(server: Server) -> None:
    created = server.client().create_key("ci")
    with server.http(created.key) as http:
        assert http.get("/v1/jobs").status_code == 200
        server.el.ok("key", "revoke", created.id)
        assert http.get("/v1/jobs").status_code == 401


def test_key_create_prints_the_key_once_and_lists_only_its_prefix(el: El) -> None:
    created = el.ok("key", "create", "--project", "team-a", "--name", "ci", "--json").json()
    assert created["key"].startswith("elk_") and created["project"] == "team-a"
    listed = el.ok("key", "list", "--project", "team-a", "--json").json()
    assert [k["id"] for k in listed] == [created["id"]]
    assert created["key"] not in json.dumps(listed)
    assert el("key", "list", "--project", "nobody").code == 2


def test_the_served_openapi_document_is_the_checked_in_one(server: Server) -> None:
    served = httpx.get(f"{server.url}/openapi.json", timeout=30).json()
    assert served == json.loads(render())
    assert json.loads(OPENAPI_FILE.read_text()) == served, (
        "openapi.json is stale: regenerate it with `python -m envloop.api.openapi > openapi.json`"
    )


def test_serve_refuses_a_non_loopback_address_until_a_key_exists(el: El, tmp_path: Path) -> None:
    refused = el("serve", "--host", "0.0.0.0", "--port", str(free_port()), "--workers", "0")
    assert refused.code == 2
    assert "refusing to listen on 0.0.0.0 without authentication" in refused.stderr
    running = start_server(el, tmp_path / "serve.log", "--workers", "0", host="0.0.0.0")
    try:
        with running.http() as http:
            assert http.get("/v1/jobs").status_code == 200
    finally:
        running.stop()


def test_stopping_the_server_stops_its_workers(busy_server: Server) -> None:
    workers = _children(busy_server.proc.pid)
    assert workers, "el serve started no worker process"
    busy_server.proc.send_signal(signal.SIGTERM)
    busy_server.proc.wait(timeout=60)
    deadline = time.monotonic() + 30
    while any(process_alive(pid) for pid in workers):
        assert time.monotonic() < deadline, "a worker outlived el serve"
        time.sleep(0.1)


def _children(pid: int) -> list[int]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = [
            int(entry.name)
            for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and _parent_of(entry) == pid
        ]
        if found:
            return found
        time.sleep(0.1)
    return []


def _parent_of(entry: Path) -> int | None:
    try:
        stat = (entry / "stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def test_a_stopping_server_ends_the_event_streams_still_open_instead_of_waiting_on_them(
    el: El, tmp_path: Path
) -> None:
    """A follower's event stream of a job no worker runs never ends by itself: on SIGTERM the
    server closes it after its grace and exits, rather than waiting for ever."""
    running = start_server(el, tmp_path / "serve.log", "--workers", "0")
    client = running.client()
    make_task(tmp_path / "tasks", "t0")
    dataset = client.push_dataset(tmp_path / "tasks", "waits")
    oracle = read_profile_file(write_profile(tmp_path / "oracle.json", {"AGENT_NAME": "oracle"}))
    client.create_profile("team/oracle", "1", oracle)
    job = client.submit_job(JobRequest(dataset=dataset.ref, profiles=["team/oracle@1"])).job
    seen: list[object] = []
    ended = threading.Event()

    def follow() -> None:
        with contextlib.suppress(httpx.HTTPError, ServerError):
            for event in client.watch_job(job.id):
                seen.append(event)
        ended.set()

    threading.Thread(target=follow, daemon=True).start()
    deadline = time.monotonic() + 60
    while not seen:
        assert time.monotonic() < deadline, "the event stream sent nothing"
        time.sleep(0.1)
    assert running.proc is not None
    running.proc.send_signal(signal.SIGTERM)
    assert running.proc.wait(timeout=SHUTDOWN_GRACE_SEC + 25) == 0
    assert ended.wait(timeout=10), "the follower's stream stayed open"
