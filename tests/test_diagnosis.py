"""A job's diagnosis: why attempts are missing, how trials were isolated, which warnings they carry,
shown by `el job result` (human and JSON) and the API, for the same job."""

from pathlib import Path

import pytest

from tests.api_server import Server
from tests.conftest import El, make_task, write_profile

pytestmark = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)


def test_el_job_result_says_why_attempts_are_missing_and_which_limits_were_cut(
    el: El, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_url: str
) -> None:
    monkeypatch.setenv("ENVLOOP_MAX_MEMORY_MB", "2048")
    monkeypatch.setenv("ENVLOOP_SANDBOX", "plain")
    src = tmp_path / "tasks"
    make_task(src, "solved", solve="touch done")
    make_task(src, "crashing", test="exit 3\n")
    make_task(src, "greedy", solve="touch done", toml="[environment]\nmemory_mb = 100000\n")
    el.ok("dataset", "push", str(src), "--name", "diag")
    profile = write_profile(tmp_path / "p.json", {"AGENT_NAME": "oracle"})
    el.ok("profile", "create", "team/oracle", "1", "--file", str(profile))
    job = el("job", "submit", "--dataset", "diag@1", "--profile", "team/oracle@1", "--wait", "--json")
    assert job.code == 3  # the job ended failed: one verifier crashed
    job_id = job.json()["id"]

    found = el.ok("job", "result", job_id, "--json").json()["diagnosis"]
    [failure] = found["failures"]
    assert (failure["kind"], failure["error_type"], failure["count"]) == ("failed", "verifier_error", 1)
    assert "exited with code 3" in failure["reason"]
    assert found["sandboxes"] == {"plain": 3}
    texts = {w["text"]: w["count"] for w in found["warnings"]}
    capped = [t for t in texts if t.startswith("memory 100000 MB asked, capped")]
    assert capped and texts[capped[0]] == 1
    assert any(t.startswith("plain mode") and n == 3 for t, n in texts.items())

    human = el.ok("job", "result", job_id).stdout
    assert "Why attempts are missing or failed" in human and "verifier_error" in human
    assert "Sandbox: 3 in plain mode (no isolation)" in human
    assert "memory 100000 MB asked, capped at the operator's maximum 2048 MB" in human


def test_a_fully_sandboxed_clean_job_says_nothing_more(el: El, tmp_path: Path, store_url: str) -> None:
    src = tmp_path / "tasks"
    task = make_task(src, "solved", solve="touch done")
    (task / "environment" / "Dockerfile").unlink()
    el.ok("dataset", "push", str(src), "--name", "clean")
    profile = write_profile(tmp_path / "p.json", {"AGENT_NAME": "oracle"})
    el.ok("profile", "create", "team/oracle", "1", "--file", str(profile))
    job_id = el.ok(
        "job", "submit", "--dataset", "clean@1", "--profile", "team/oracle@1", "--wait", "--json"
    ).json()["id"]
    found = el.ok("job", "result", job_id, "--json").json()["diagnosis"]
    assert found["failures"] == [] and found["sandboxes"] == {"bwrap": 1}
    human = el.ok("job", "result", job_id).stdout
    assert "Why attempts are missing" not in human and "Sandbox:" not in human


def test_the_api_serves_the_same_diagnosis(server: Server, tmp_path: Path) -> None:
    src = tmp_path / "tasks"
    make_task(src, "crashing", test="exit 3\n")
    server.el.ok("dataset", "push", str(src), "--name", "api-diag")
    profile = write_profile(tmp_path / "p.json", {"AGENT_NAME": "nop"})
    server.el.ok("profile", "create", "team/nop", "1", "--file", str(profile))
    job = server.el("job", "submit", "--dataset", "api-diag@1", "--profile", "team/nop@1", "--wait", "--json")
    assert job.code == 3
    job_id = job.json()["id"]
    with server.http() as http:
        over_http = http.get(f"/v1/jobs/{job_id}/diagnosis").json()
    assert over_http == server.el.ok("job", "result", job_id, "--json").json()["diagnosis"]
    assert over_http["failures"][0]["error_type"] == "verifier_error"
