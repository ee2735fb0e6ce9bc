"""`el worker --executor`: bad choices are refused as bad input, and a Ray cluster that is not there
is one line and exit 4 within seconds, never a worker waiting without end."""

import time
from pathlib import Path

import pytest

from envloop.services.jobs import JobRequest
from tests.api_server import start_server
from tests.conftest import El, make_task, write_profile
from tests.ports import free_port
from tests.ray_cluster import ONE_CLUSTER_AT_A_TIME, RayCluster


def _one_line(result: object, code: int) -> str:
    stderr: str = result.stderr.strip()  # type: ignore[attr-defined]
    assert result.code == code, stderr  # type: ignore[attr-defined]
    assert len(stderr.splitlines()) == 1, stderr
    assert "Traceback" not in stderr
    return stderr


def test_an_unknown_executor_is_refused_as_bad_input(el: El) -> None:
    assert "expected local or ray" in _one_line(el("worker", "--executor", "kubernetes"), 2)


def test_a_ray_address_without_the_ray_executor_is_refused_as_bad_input(el: El) -> None:
    assert "--executor ray" in _one_line(el("worker", "--ray-address", "127.0.0.2:26380"), 2)


@pytest.mark.ray
def test_a_ray_cluster_that_is_not_there_is_one_line_and_exit_4_within_seconds(el: El) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed (scripts/setup installs it)")
    address = f"127.0.0.2:{free_port('127.0.0.2')}"
    started = time.monotonic()
    result = el("worker", "--executor", "ray", "--ray-address", address, timeout=60)
    assert f"could not reach the Ray cluster at {address}" in _one_line(result, 4)
    assert time.monotonic() - started < 30


def test_el_serve_refuses_a_bad_executor_choice_as_bad_input(el: El) -> None:
    assert "expected local or ray" in _one_line(el("serve", "--executor", "slurm", "--port", "1"), 2)
    assert "--executor ray" in _one_line(el("serve", "--ray-address", "127.0.0.2:26380", "--port", "1"), 2)


@pytest.mark.slow
@ONE_CLUSTER_AT_A_TIME
def test_a_job_submitted_to_el_serve_with_the_ray_executor_runs_its_trials_on_ray(
    el: El, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's worker sends the trial to the cluster: the agent runs in a Ray node's run
    directory, and a trial no node could hold fails at once as Ray's executor says."""
    pytest.importorskip("ray", reason="the ray extra is not installed (scripts/setup installs it)")
    cluster = RayCluster()
    try:
        cluster.start()
        for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_USAGE_STATS_ENABLED"):
            monkeypatch.setenv(name, cluster.env[name])
        monkeypatch.setenv("ENVLOOP_SANDBOX", "plain")
        src = tmp_path / "src"
        make_task(src, "small")
        make_task(src, "huge", toml="[environment]\nmemory_mb = 100000000\n")
        el.ok("dataset", "push", str(src), "--name", "ds")
        agent = {"AGENT_NAME": "command", "AGENT_COMMAND": 'echo "ran in $ENVLOOP_APP_DIR"'}
        el.ok("profile", "create", "cmd", "1", "--file", str(write_profile(tmp_path / "p.json", agent)))
        args = ("--workers", "1", "--executor", "ray", "--ray-address", cluster.address)
        server = start_server(el, tmp_path / "serve.log", *args)
        try:
            client = server.client()
            job = client.submit_job(JobRequest(dataset="ds@1", profiles=["cmd@1"])).job
            deadline = time.monotonic() + 240
            while client.get_job(job.id).status not in ("completed", "failed", "cancelled"):
                assert time.monotonic() < deadline, server.log.read_text()[-3000:]
                time.sleep(0.5)
            found = {t.task: t for t in client.list_trials(job.id)}
            assert (found["huge"].status, found["huge"].error_type) == ("failed", "resource_exhausted")
            assert found["small"].status == "completed", found["small"].error_message
            stdout = client.trial_logs(found["small"].id, "agent")["stdout"]
            assert "/envloop-ray/" in stdout, stdout  # a Ray node's run directory, not this worker's
            assert "trials on Ray at " + cluster.address in server.log.read_text()
        finally:
            server.stop()
    finally:
        cluster.stop()
