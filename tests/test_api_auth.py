"""Who may see what: keys see only their project; share tokens read their one job and nothing else."""

import time
from pathlib import Path

import httpx
import pytest

from envloop.client import Client
from envloop.services.jobs import JobRequest
from envloop.services.profiles import read_profile_file
from tests.api_server import Server
from tests.conftest import make_task, write_profile
from tests.pg import BACKENDS

pytestmark = pytest.mark.parametrize("store_url", BACKENDS, indirect=True)


def _job(client: Client, tmp_path: Path, name: str) -> str:
    src = tmp_path / name
    make_task(src, "t0", solve="touch done")
    ref = client.push_dataset(src, name).ref
    document = read_profile_file(write_profile(tmp_path / "p.json", {"AGENT_NAME": "nop"}))
    client.create_profile("p", "1", document)
    return client.submit_job(JobRequest(dataset=ref, profiles=["p@1"])).job.id


def test_another_projects_key_gets_404_for_this_projects_resources(server: Server, tmp_path: Path) -> None:
    job_id = _job(server.client(), tmp_path, "mine")
    (trial,) = server.client().list_trials(job_id)
    other = server.el.ok("key", "create", "--project", "other", "--json").json()["key"]
    with server.http(other) as http:
        for path in (
            f"/v1/jobs/{job_id}",
            f"/v1/jobs/{job_id}/result",
            f"/v1/jobs/{job_id}/trials",
            f"/v1/jobs/{job_id}/events",
            f"/v1/trials/{trial.id}",
            f"/v1/trials/{trial.id}/logs",
            "/v1/datasets/mine@1",
            "/v1/profiles/p@1",
        ):
            assert http.get(path).status_code == 404, path
        assert http.post(f"/v1/jobs/{job_id}/cancel").status_code == 404
        assert http.post(f"/v1/trials/{trial.id}/invalidate", json={"reason": "x"}).status_code == 404
        assert http.get("/v1/jobs").json() == []
        assert http.get("/v1/datasets").json() == []
    assert server.client().get_job(job_id).cancel_requested is False


def test_a_share_token_reads_its_job_and_nothing_else(server: Server, tmp_path: Path) -> None:
    client = server.client()
    shared, other = _job(client, tmp_path, "a"), _job(client, tmp_path, "b")
    (trial,) = client.list_trials(shared)
    (other_trial,) = client.list_trials(other)
    token = client.create_share(shared).token
    with server.http(token) as http:
        for path in (
            f"/v1/jobs/{shared}",
            f"/v1/jobs/{shared}/result",
            f"/v1/jobs/{shared}/trials",
            f"/v1/jobs/{shared}/export",
            f"/v1/trials/{trial.id}",
            f"/v1/trials/{trial.id}/logs",
            f"/v1/trials/{trial.id}/artifacts",
            f"/v1/rollouts/{trial.id}",
        ):
            assert http.get(path).status_code == 200, path
        for path in (
            f"/v1/jobs/{other}",
            f"/v1/jobs/{other}/result",
            f"/v1/jobs/{other}/events",
            f"/v1/trials/{other_trial.id}",
            f"/v1/trials/{other_trial.id}/steps",
            f"/v1/trials/{other_trial.id}/artifacts/agent/stdout.txt",
            f"/v1/rollouts/{other_trial.id}/events",
        ):
            assert http.get(path).status_code == 404, path
        with http.stream("GET", f"/v1/jobs/{shared}/events") as events:  # the job never ends here
            assert events.status_code == 200
            assert next(events.iter_lines()) == "event: job"
        with http.stream("GET", f"/v1/rollouts/{trial.id}/events") as events:
            assert events.status_code == 200
        assert http.get(f"/v1/trials/{trial.id}/steps").json() is None
        for path in ("/v1/jobs", "/v1/datasets", "/v1/profiles", "/v1/runners", "/v1/keys"):
            assert http.get(path).status_code == 403, path
        assert http.post(f"/v1/jobs/{shared}/cancel").status_code == 403
        assert http.post(f"/v1/trials/{trial.id}/invalidate", json={"reason": "x"}).status_code == 403
        assert http.post(f"/v1/jobs/{shared}/shares", json={}).status_code == 403
        assert http.post("/v1/jobs", json={"dataset": "a@1", "profiles": ["p@1"]}).status_code == 403
    assert client.get_job(shared).cancel_requested is False
    assert len(client.list_jobs()) == 2


def test_a_revoked_or_expired_share_token_is_refused(server: Server, tmp_path: Path) -> None:
    client = server.client()
    job_id = _job(client, tmp_path, "a")
    revoked = client.create_share(job_id)
    expiring = client.create_share(job_id, expires_in_sec=0.5)
    assert client.revoke_share(revoked.id).active is False
    time.sleep(1)
    for token in (revoked.token, expiring.token):
        assert (
            httpx.get(
                f"{server.url}/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"}
            ).status_code
            == 401
        )
    assert [s.active for s in client.list_shares(job_id)] == [False, False]


def test_without_valid_credentials_every_v1_path_answers_401_even_unknown_ones(server: Server) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as anonymous:
        assert anonymous.get("/v1/health").status_code == 200
        for method, path in (("GET", "/v1/jobs"), ("GET", "/v1/no-such-thing"), ("DELETE", "/v1/jobs")):
            assert anonymous.request(method, path).status_code == 401, (method, path)
        assert anonymous.get("/v1/no-such-thing", headers={"Authorization": "Bearer nope"}).status_code == 401
    with server.http() as keyed:
        assert keyed.get("/v1/no-such-thing").status_code == 404
        wrong_method = keyed.delete("/v1/jobs")
        assert wrong_method.status_code == 405
        assert set(wrong_method.headers["allow"].split(", ")) == {"GET", "POST"}


def test_el_job_share_makes_a_token_the_cli_can_read_with_until_unshared(
    server: Server, tmp_path: Path
) -> None:
    el = server.el
    shared, other = _job(server.client(), tmp_path, "a"), _job(server.client(), tmp_path, "b")
    created = el.ok("job", "share", shared, "--expires-in", "3600", "--json").json()
    assert created["job_id"] == shared and created["active"] and created["token"].startswith("els_")
    text = el.ok("job", "share", shared).stdout
    assert f"read-only access to job {shared}" in text and "token  els_" in text
    # Embedded, the page is a full URL too: where `el serve` answers with its defaults, or --url.
    assert "page   http://127.0.0.1:8000/share/els_" in text
    proxied = el.ok("job", "share", shared, "--url", "https://evals.example/").stdout
    assert "page   https://evals.example/share/els_" in proxied
    # Against the server, the human view names the console page a reader opens with no key.
    remote = el("job", "share", shared, env={"ENVLOOP_URL": server.url, "ENVLOOP_API_KEY": server.key})
    assert remote.code == 0, remote.stderr
    [page] = [line.split()[1] for line in remote.stdout.splitlines() if line.startswith("page ")]
    assert page.startswith(f"{server.url}/share/")
    opened = httpx.get(page, timeout=30)
    assert opened.status_code == 200 and shared in opened.text
    reader = {"ENVLOOP_URL": server.url, "ENVLOOP_API_KEY": created["token"]}
    assert el("job", "get", shared, "--json", env=reader).json()["id"] == shared
    for refused in (("job", "get", other), ("job", "cancel", shared), ("dataset", "list")):
        result = el(*refused, env=reader)
        assert result.code != 0 and len(result.stderr.strip().splitlines()) == 1, refused
    listed = el.ok("job", "shares", shared, "--json").json()
    assert [s["active"] for s in listed] == [True] * 4 and "token" not in listed[0]
    revoked = el.ok("job", "unshare", created["id"], "--json").json()
    assert revoked["active"] is False and revoked["revoked_at"] is not None
    assert el("job", "get", shared, "--json", env=reader).code != 0
    assert el("job", "unshare", "shr_unknown").code == 2
