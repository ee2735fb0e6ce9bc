"""A job's diagnosis: why attempts are missing, how trials were isolated, which warnings they carry,
shown by `el job result` (human and JSON) and the API, for the same job."""

from pathlib import Path

import pytest

from envloop.services import datasets, job_reads
from envloop.services.context import Context
from envloop.wire.jobs import JobRequest
from tests.api_server import Server
from tests.conftest import El, make_task, publish_profile, run_job_in_process

pytestmark = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)


def finished_job(ctx: Context, tmp_path: Path, src: Path, params: dict[str, str]) -> str:
    """Push the tasks under `src`, publish profile `team/agent@1` with `params` and run the job to
    its end in this process: set-up, through the services (the tests read its diagnosis)."""
    ref = datasets.push_dataset(ctx, src, "diag").ref
    profile = publish_profile(ctx, tmp_path / "p.json", "team/agent", params)
    return run_job_in_process(ctx, JobRequest(dataset=ref, profiles=[profile]))


def test_el_job_result_says_why_attempts_are_missing_and_which_limits_were_cut(
    el: El, ctx: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVLOOP_MAX_MEMORY_MB", "2048")
    monkeypatch.setenv("ENVLOOP_SANDBOX", "plain")
    src = tmp_path / "tasks"
    make_task(src, "solved", solve="touch done")
    make_task(src, "crashing", test="exit 3\n")
    make_task(src, "greedy", solve="touch done", toml="[environment]\nmemory_mb = 100000\n")
    job_id = finished_job(ctx, tmp_path, src, {"AGENT_NAME": "oracle"})
    assert job_reads.get_job(ctx, job_id).status == "failed"  # one verifier crashed

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


def test_a_fully_sandboxed_clean_job_says_nothing_more(el: El, ctx: Context, tmp_path: Path) -> None:
    src = tmp_path / "tasks"
    task = make_task(src, "solved", solve="touch done")
    (task / "environment" / "Dockerfile").unlink()
    job_id = finished_job(ctx, tmp_path, src, {"AGENT_NAME": "oracle"})
    assert job_reads.get_job(ctx, job_id).status == "completed"
    found = el.ok("job", "result", job_id, "--json").json()["diagnosis"]
    assert found["failures"] == [] and found["sandboxes"] == {"bwrap": 1}
    human = el.ok("job", "result", job_id).stdout
    assert "Why attempts are missing" not in human and "Sandbox:" not in human


def test_the_api_serves_the_same_diagnosis(server: Server, ctx: Context, tmp_path: Path) -> None:
    src = tmp_path / "tasks"
    make_task(src, "crashing", test="exit 3\n")
    job_id = finished_job(ctx, tmp_path, src, {"AGENT_NAME": "nop"})
    assert job_reads.get_job(ctx, job_id).status == "failed"
    with server.http() as http:
        over_http = http.get(f"/v1/jobs/{job_id}/diagnosis").json()
    assert over_http == server.el.ok("job", "result", job_id, "--json").json()["diagnosis"]
    assert over_http["failures"][0]["error_type"] == "verifier_error"
