"""`el worker --executor ray` on a real two-node Ray cluster on loopback: trials run on the cluster as
tasks sized by their task.toml, their results, logs and files reach the store and the artifact store,
and a node that dies mid-trial costs a new run of the trial, recorded once."""

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from envloop.scheduling.ray_executor import _sweep_dead_runs
from envloop.services import datasets, job_submission, jobs, profiles, trials
from envloop.services.context import Context
from envloop.store.tables import Trial
from tests.conftest import El, make_task, trial_processes, wait_for, write_profile
from tests.ray_cluster import ONE_CLUSTER_AT_A_TIME, RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.slow, ONE_CLUSTER_AT_A_TIME]


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    pytest.importorskip("ray", reason="the ray extra is not installed (scripts/setup installs it)")
    running = RayCluster()
    try:
        running.start()
        yield running
    finally:
        running.stop()


def _submit(ctx: Context, tmp_path: Path, command: str, tasks: dict[str, str]) -> str:
    src = tmp_path / "src"
    for name, toml in tasks.items():
        make_task(src, name, toml=toml)
    ref = datasets.push_dataset(ctx, src, "ds").ref
    doc = profiles.read_profile_file(
        write_profile(tmp_path / "p.json", {"AGENT_NAME": "command", "AGENT_COMMAND": command})
    )
    profiles.create_profile(ctx, "cmd", "1", doc)
    return job_submission.submit_job(ctx, job_submission.JobRequest(dataset=ref, profiles=["cmd@1"])).job.id


def _ray_worker(cluster: RayCluster, home: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**cluster.env, "ENVLOOP_HOME": str(home), "ENVLOOP_SANDBOX": "plain"}
    with log.open("ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "envloop",
                "worker",
                "--executor",
                "ray",
                "--ray-address",
                cluster.address,
                *args,
            ],
            env=env,
            stdout=out,
            stderr=out,
        )


def _trials(ctx: Context, job_id: str) -> dict[str, Trial]:
    with ctx.store.read() as session:
        return {t.task_name: t for t in session.scalars(select(Trial).where(Trial.job_id == job_id))}


def _kill_trial_processes(trial_ids: set[str]) -> None:
    """Commands of a run whose node was killed outlive it (plain mode); the test ends them."""
    for pid in trial_processes(trial_ids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_trials_run_as_ray_tasks_sized_by_their_task_and_their_files_reach_the_store(
    cluster: RayCluster, ctx: Context, home: Path, tmp_path: Path
) -> None:
    """The worker node has 2 CPUs: two trials that each need 2 run one after the other although the
    worker sends both at once; one that needs more memory than any node has fails at once."""
    command = "echo start $(date +%s.%N); sleep 1.5; echo end $(date +%s.%N); touch $ENVLOOP_APP_DIR/done"
    job_id = _submit(
        ctx,
        tmp_path,
        command,
        {
            "wide-a": "[environment]\ncpus = 2\n",
            "wide-b": "[environment]\ncpus = 2\n",
            "huge": "[environment]\nmemory_mb = 100000000\n",
        },
    )
    log = tmp_path / "worker.log"
    worker = _ray_worker(cluster, home, log, "--capacity", "3", "--idle-exit", "3")
    assert worker.wait(timeout=240) == 0, log.read_text()[-3000:]

    found = _trials(ctx, job_id)
    huge = found.pop("huge")
    assert (huge.status, huge.error_type) == ("failed", "resource_exhausted")
    assert "needs 1 CPUs and 100000000 MB of memory" in (huge.error_message or "")
    spans = []
    for trial in found.values():
        assert (trial.status, trial.reward, trial.runs) == ("completed", 1.0, 1), trial.error_message
        stdout = trials.trial_logs(ctx, trial.id, "agent")["stdout"].split()
        spans.append((float(stdout[1]), float(stdout[3])))
        assert "agent/stdout.txt" in {a.path for a in trials.list_artifacts(ctx, trial.id)}
    (first, second) = sorted(spans)
    assert second[0] >= first[1], f"two 2-CPU trials overlapped on a 2-CPU node: {spans}"
    el = El(home=home, cwd=tmp_path)
    assert "start" in el.ok("trial", "logs", next(iter(found.values())).id, "--phase", "agent").stdout


def test_a_ray_node_dying_mid_trial_costs_a_new_run_recorded_once(
    cluster: RayCluster, ctx: Context, home: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "runs.txt"
    command = (
        f'echo run >> {marker}; [ "$(wc -l < {marker})" -gt 1 ] || sleep 120; touch $ENVLOOP_APP_DIR/done'
    )
    job_id = _submit(ctx, tmp_path, command, {"long": ""})
    log = tmp_path / "worker.log"
    worker = _ray_worker(cluster, home, log, "--idle-exit", "3", "--lease-ttl", "10")
    trial_ids = set()
    try:
        wait_for(marker.exists, timeout=120)
        trial_ids = {t.id for t in _trials(ctx, job_id).values()}
        cluster.add_node("127.0.0.4")  # where the new run can go
        cluster.kill_node("127.0.0.3")  # the node running the first run dies
        assert worker.wait(timeout=240) == 0, log.read_text()[-3000:]
    finally:
        if worker.poll() is None:
            worker.kill()
        _kill_trial_processes(trial_ids)
    (trial,) = _trials(ctx, job_id).values()
    assert (trial.status, trial.reward, trial.error_type, trial.runs) == ("completed", 1.0, None, 2)
    assert marker.read_text().splitlines() == ["run", "run"]
    assert "lost" in log.read_text() and "handed back to the queue" in log.read_text()
    # What the lost run left on the machine (its instance's file system) is removed by a run on the
    # machine once the lost run's Ray worker is gone; the replacement may have run while it was
    # still dying, so the sweep a later run makes is made here once the worker has surely died.
    deadline = time.monotonic() + 30
    while f"{trial.id}.r1" in Path("/proc/mounts").read_text() and time.monotonic() < deadline:
        _sweep_dead_runs(Path(tempfile.gettempdir()) / "envloop-ray")
        time.sleep(0.5)
    assert f"{trial.id}.r1" not in Path("/proc/mounts").read_text()
    assert [p["name"] for p in trial.phases][:3] == ["setup", "agent", "verifier"]


def test_cancelling_a_job_stops_its_trial_on_the_ray_node_and_tears_it_down(
    cluster: RayCluster, ctx: Context, home: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "started.txt"
    job_id = _submit(
        ctx, tmp_path, f"echo started > {marker}; sleep 120; touch $ENVLOOP_APP_DIR/done", {"t": ""}
    )
    log = tmp_path / "worker.log"
    worker = _ray_worker(cluster, home, log, "--idle-exit", "3")
    trial_ids: set[str] = set()
    try:
        wait_for(marker.exists, timeout=120)
        trial_ids = {t.id for t in _trials(ctx, job_id).values()}
        jobs.cancel_job(ctx, job_id)
        assert worker.wait(timeout=120) == 0, log.read_text()[-3000:]
        wait_for(lambda: not trial_processes(trial_ids), timeout=30)  # the runner's teardown on the node
    finally:
        if worker.poll() is None:
            worker.kill()
        _kill_trial_processes(trial_ids)
    (trial,) = _trials(ctx, job_id).values()
    assert (trial.status, trial.runs) == ("cancelled", 1)
    assert jobs.get_job(ctx, job_id).status == "cancelled"
