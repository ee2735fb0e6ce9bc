"""Workers on one store: shared queue, a killed worker's trial re-run and recorded once, cancellation."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from envloop import liveness
from envloop.environments.local.instance import RUNTIME_DIR, instance_parent, make_root
from envloop.services import jobs
from envloop.services.context import Context, open_context
from envloop.store.tables import Trial
from tests.conftest import submit_command_job, trial_processes, wait_for

pytestmark = pytest.mark.slow


def _worker(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "envloop", "worker", *args],
        env=dict(os.environ, ENVLOOP_HOME=str(home), **(env or {})),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _trials(ctx: Context, job_id: str) -> list[Trial]:
    with ctx.store.read() as session:
        return list(session.scalars(select(Trial).where(Trial.job_id == job_id)))


def test_several_workers_share_the_queue_and_run_each_trial_once(
    ctx: Context, home: Path, tmp_path: Path
) -> None:
    job_id = submit_command_job(ctx, tmp_path, "touch $ENVLOOP_APP_DIR/done", tasks=10, attempts=3)
    workers = [_worker(home, "--capacity", "2", "--idle-exit", "2") for _ in range(3)]
    try:
        wait_for(lambda: jobs.get_job(ctx, job_id).status == "completed", timeout=120)
    finally:
        for proc in workers:
            proc.wait(timeout=60)
    trials = _trials(ctx, job_id)
    assert len(trials) == 30
    assert all(t.status == "completed" and t.reward == 1.0 and t.runs == 1 for t in trials)


def _rerun_after_a_kill(
    ctx: Context, home: Path, tmp_path: Path, lease: str, within: float, first_env: dict[str, str]
) -> Trial:
    """A worker (of `first_env`) SIGKILLed while it runs a job's one trial, then another worker on
    this host; the trial once the job completed, which must be `within` seconds of the second start."""
    job_id = submit_command_job(ctx, tmp_path, "sleep 2; touch $ENVLOOP_APP_DIR/done")
    first = _worker(home, "--capacity", "1", "--lease-ttl", lease, env=first_env)
    wait_for(lambda: _trials(ctx, job_id)[0].status == "running")
    first.send_signal(signal.SIGKILL)
    first.wait()
    (trial,) = _trials(ctx, job_id)
    wait_for(lambda: not trial_processes({trial.id}), timeout=10)  # the sandbox died with its worker
    second = _worker(home, "--capacity", "1", "--lease-ttl", lease, "--idle-exit", "1")
    try:
        wait_for(lambda: jobs.get_job(ctx, job_id).status == "completed", timeout=within)
    finally:
        second.wait(timeout=60)
    (trial,) = _trials(ctx, job_id)
    return trial


def test_a_killed_workers_trial_is_taken_over_at_once_by_the_next_worker_and_recorded_once(
    ctx: Context, home: Path, tmp_path: Path
) -> None:
    """On the host where it died, the next worker sees the worker is gone and re-runs its trial
    without waiting out its lease (30 s)."""
    trial = _rerun_after_a_kill(ctx, home, tmp_path, lease="30", within=20, first_env={})
    assert (trial.status, trial.reward, trial.runs) == ("completed", 1.0, 2)


def test_a_killed_worker_of_another_host_loses_its_trial_when_its_lease_expires(
    ctx: Context, home: Path, tmp_path: Path
) -> None:
    """A worker of another host cannot be seen to be gone: its trial waits for its lease to expire,
    then is re-run and recorded once."""
    elsewhere = {liveness.HOST_VARIABLE: "another-host"}
    trial = _rerun_after_a_kill(ctx, home, tmp_path, lease="2", within=60, first_env=elsewhere)
    assert (trial.status, trial.reward, trial.runs) == ("completed", 1.0, 2)
    # The first run's instance outlived it (its worker was not seen gone); the store's next worker
    # removes it, file system and all.
    assert _worker(home, "--idle-exit", "0.2").wait(timeout=60) == 0
    assert not _quota_mounts(trial.id)


def _quota_mounts(trial_id: str) -> list[str]:
    """The mount points of the trial's instance file systems in this process's mount table."""
    table = Path("/proc/self/mountinfo").read_text().splitlines()
    return [line.split(" ")[4] for line in table if trial_id in line and " - tmpfs " in line]


@pytest.mark.skipif(os.geteuid() != 0, reason="instance file systems are mounted by a root worker only")
def test_a_killed_workers_instance_file_system_is_unmounted_by_the_next_worker_of_any_store(
    ctx: Context, home: Path, tmp_path: Path
) -> None:
    """A killed worker cannot unmount its trial's tmpfs, which holds the trial's files in memory and
    lengthens the mount table every sandbox copies. The next worker on the host unmounts it even
    when it serves another store (the first's may be deleted by then), and leaves alone the file
    system of a worker that still runs."""
    killed_job = submit_command_job(ctx, tmp_path, "sleep 60")
    living_home = tmp_path / "living"
    living_ctx = open_context(living_home)
    living_job = submit_command_job(
        living_ctx, tmp_path / "living-tasks", "sleep 6; touch $ENVLOOP_APP_DIR/done"
    )
    first = _worker(home, "--capacity", "1")
    living = _worker(living_home, "--capacity", "1", "--idle-exit", "1")
    try:
        (killed,) = _trials(ctx, killed_job)
        (running,) = _trials(living_ctx, living_job)
        wait_for(lambda: bool(_quota_mounts(killed.id)) and bool(_quota_mounts(running.id)), timeout=60)
        first.send_signal(signal.SIGKILL)
        first.wait()
        wait_for(lambda: not trial_processes({killed.id}), timeout=10)
        assert _quota_mounts(killed.id)  # nothing else removes it

        sweeper = _worker(tmp_path / "another-store", "--idle-exit", "0.2")
        assert sweeper.wait(timeout=60) == 0

        assert not _quota_mounts(killed.id)
        assert _quota_mounts(running.id)
        wait_for(lambda: jobs.get_job(living_ctx, living_job).status == "completed", timeout=60)
        (running,) = _trials(living_ctx, living_job)
        assert (running.status, running.reward) == ("completed", 1.0)
    finally:
        first.kill()
        living.wait(timeout=60)


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root worker's instances live below /run/envloop")
def test_a_stores_directory_below_run_envloop_goes_with_its_last_instance(
    ctx: Context, home: Path, tmp_path: Path
) -> None:
    """Each store a root worker serves has a directory below `/run/envloop`; a deleted store's was
    kept for good (thousands on a machine that runs test suites). A worker's start-up sweep removes
    the empty ones, its stop its own, and one still holding an instance stays."""
    stale = RUNTIME_DIR / "deadbeefdeadbeef"
    held = RUNTIME_DIR / "feedfacefeedface"
    make_root(stale / "trl_gone.r1", private_parent=True)
    (stale / "trl_gone.r1").rmdir()
    make_root(held / "trl_running.r1", private_parent=True)
    try:
        job_id = submit_command_job(ctx, tmp_path, "true")
        worker = _worker(home, "--idle-exit", "0.2")
        assert worker.wait(timeout=60) == 0
        (trial,) = _trials(ctx, job_id)
        assert (trial.status, trial.sandbox) == ("completed", "bwrap")
        assert not instance_parent(ctx.instances_dir, for_other_uid=True).exists()
        assert not stale.exists()
        assert (held / "trl_running.r1").is_dir()
    finally:
        (held / "trl_running.r1").rmdir()
        held.rmdir()


def test_cancel_leaves_no_process_and_no_instance_directory(ctx: Context, home: Path, tmp_path: Path) -> None:
    job_id = submit_command_job(ctx, tmp_path, "setsid sleep 1000 & sleep 1000", tasks=2, attempts=2)
    worker = _worker(home, "--capacity", "2")
    try:
        wait_for(lambda: sum(t.status == "running" for t in _trials(ctx, job_id)) == 2)
        running = {t.id for t in _trials(ctx, job_id) if t.status == "running"}
        wait_for(lambda: len(trial_processes(running)) >= 2)
        jobs.cancel_job(ctx, job_id)
        wait_for(lambda: jobs.get_job(ctx, job_id).status == "cancelled", timeout=30)
        assert all(t.status == "cancelled" for t in _trials(ctx, job_id))
        assert trial_processes(running) == []
        assert not any(ctx.instances_dir.iterdir())
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def test_a_stopped_worker_hands_its_trials_back(ctx: Context, home: Path, tmp_path: Path) -> None:
    job_id = submit_command_job(ctx, tmp_path, "sleep 1000")
    worker = _worker(home, "--capacity", "1")
    wait_for(lambda: _trials(ctx, job_id)[0].status == "running")
    worker.send_signal(signal.SIGTERM)
    worker.wait(timeout=30)
    (trial,) = _trials(ctx, job_id)
    assert trial.status == "pending" and trial.lease_owner is None
    assert trial_processes({trial.id}) == []
