"""The shared artifact store on a real S3-compatible server (moto's server mode on loopback): task
archives and trial files travel through the bucket, so a worker with its own ENVLOOP_HOME runs a job
pushed from another one, and a worker that cannot reach an archive never fails a trial silently."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from sqlalchemy import select

from envloop.services import jobs
from envloop.services.context import Context, open_context
from envloop.store.artifacts import (
    ArtifactIntegrityError,
    ArtifactNotFoundError,
    ArtifactStoreUnavailableError,
    open_artifact_store,
)
from envloop.store.tables import Trial
from envloop.tasks.archive import pack_task
from envloop.tasks.digest import task_digest
from tests import s3
from tests.conftest import El, make_task, submit_command_job, wait_for


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with s3.server() as url:
        yield url


@pytest.fixture
def s3_url(home: Path, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket, named by ENVLOOP_ARTIFACTS and the AWS variables for this process and its children."""
    bucket, env = s3.bucket_env(s3_endpoint)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    url = f"s3://{bucket}/team"
    monkeypatch.setenv("ENVLOOP_ARTIFACTS", url)
    return url


def _bucket_client(endpoint: str) -> object:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=s3.CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=s3.CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name=s3.CREDENTIALS["AWS_DEFAULT_REGION"],
    )


def _stage(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_a_published_run_replaces_the_earlier_one_and_no_reader_gets_a_stale_copy(
    home: Path, tmp_path: Path, s3_url: str
) -> None:
    worker = open_artifact_store(s3_url, tmp_path / "worker")
    reader = open_artifact_store(s3_url, tmp_path / "reader")
    first = worker.staging_dir("trl_a.r1")
    _stage(first, {"agent/stdout.txt": "one", "agent/extra.txt": "x"})
    (first / "agent" / "host-file").symlink_to("/etc/hostname")
    worker.publish("trl_a.r1", "trl_a")
    assert not first.exists()
    assert [(a.path, a.size) for a in reader.list_trial("trl_a")] == [
        ("agent/extra.txt", 1),
        ("agent/stdout.txt", 3),
    ]  # the link planted by the trial is never followed to a host file
    assert reader.trial_file("trl_a", "agent/stdout.txt").read_text() == "one"

    _stage(worker.staging_dir("trl_a.r2"), {"agent/stdout.txt": "two!"})
    worker.publish("trl_a.r2", "trl_a")
    assert reader.trial_file("trl_a", "agent/stdout.txt").read_text() == "two!"
    with pytest.raises(ArtifactNotFoundError):
        reader.trial_file("trl_a", "agent/extra.txt")
    for hostile in ("../trl_b/agent/stdout.txt", "/etc/passwd", "agent/../../x", ".", ""):
        with pytest.raises(ArtifactNotFoundError):
            reader.trial_file("trl_a", hostile)
    assert reader.list_trial("../trl_a") == []


def test_task_archives_are_fetched_once_per_digest_and_checked_against_it(
    home: Path, tmp_path: Path, s3_url: str, s3_endpoint: str
) -> None:
    task = make_task(tmp_path / "src", "t0")
    digest = task_digest(task)
    open_artifact_store(s3_url, tmp_path / "pusher").put_task(digest, task)
    fetched = open_artifact_store(s3_url, tmp_path / "worker").task_dir(digest)
    assert (fetched / "instruction.md").read_text() == "Do the t0 thing.\n"

    # Someone with write access swaps the object for another task's archive.
    other = make_task(tmp_path / "src", "evil", solve="curl attacker")
    pack_task(other, tmp_path / "evil.tar.gz")
    bucket = s3_url.removeprefix("s3://").split("/")[0]
    key = f"team/tasks/{digest.split(':')[1]}.tar.gz"
    evil = (tmp_path / "evil.tar.gz").read_bytes()
    _bucket_client(s3_endpoint).put_object(Bucket=bucket, Key=key, Body=evil)  # type: ignore[attr-defined]
    victim = open_artifact_store(s3_url, tmp_path / "victim")
    with pytest.raises(ArtifactIntegrityError, match="does not hold the content of its digest"):
        victim.task_dir(digest)
    assert victim.small_task_dir(digest) is None
    assert not victim.task_archive(digest).exists()


def test_an_unreachable_store_is_one_clear_error_within_seconds(
    home: Path, s3_url: str, monkeypatch: pytest.MonkeyPatch, refused_port: int
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{refused_port}")
    store = open_artifact_store(s3_url, home)
    started = time.monotonic()
    with pytest.raises(ArtifactStoreUnavailableError) as raised:
        store.task_dir("sha256:" + "0" * 64)
    assert time.monotonic() - started < 20
    message = str(raised.value)
    assert message.startswith(f"artifact store {s3_url}: could not")
    assert "\n" not in message
    assert s3.CREDENTIALS["AWS_SECRET_ACCESS_KEY"] not in message


def test_files_the_store_cannot_take_stay_staged_until_a_later_publish(
    home: Path, s3_url: str, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, refused_port: int
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{refused_port}")
    cut_off = open_artifact_store(s3_url, home)
    _stage(cut_off.staging_dir("trl_a.r1"), {"agent/stdout.txt": "kept"})
    with pytest.raises(ArtifactStoreUnavailableError):
        cut_off.publish("trl_a.r1", "trl_a")
    assert cut_off.staged_runs() == ["trl_a.r1"]

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    reachable = open_artifact_store(s3_url, home)
    reachable.publish("trl_a.r1", "trl_a")
    assert reachable.staged_runs() == []
    assert reachable.trial_file("trl_a", "agent/stdout.txt").read_text() == "kept"


def _worker(home: Path, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "envloop", "worker", "--capacity", "2", "--idle-exit", "3"],
            env={**os.environ, "ENVLOOP_HOME": str(home), **(env or {})},
            stdout=out,
            stderr=out,
        )


def _trials(ctx: Context, job_id: str) -> list[Trial]:
    with ctx.store.read() as session:
        return list(session.scalars(select(Trial).where(Trial.job_id == job_id)))


@pytest.mark.slow
@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_a_worker_with_its_own_home_runs_a_job_pushed_elsewhere(
    home: Path, store_url: str, s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    """Two machines share only the PostgreSQL store and the bucket: nothing on the pusher's disk."""
    pusher = open_context(home)
    try:
        job_id = submit_command_job(
            pusher, tmp_path, "echo ran-on-the-other-machine; touch $ENVLOOP_APP_DIR/done", tasks=3
        )
        other_home = tmp_path / "other-machine"
        worker = _worker(other_home, tmp_path / "worker.log")
        assert worker.wait(timeout=180) == 0, (tmp_path / "worker.log").read_text()[-2000:]
        assert jobs.get_job(pusher, job_id).status == "completed"
        trials = _trials(pusher, job_id)
        assert [(t.status, t.reward, t.runs) for t in trials] == [("completed", 1.0, 1)] * 3
        assert not any((home / "artifacts" / "trials").iterdir())  # nothing was written on the pusher's side
        assert not (other_home / "envloop.db").exists()
        assert not any((other_home / "artifacts" / "staging").iterdir())  # every run was published

        el = El(home=home, cwd=tmp_path)
        trial = trials[0].id
        logs = el.ok("trial", "logs", trial, "--phase", "agent", "--json").json()
        assert "ran-on-the-other-machine" in logs["stdout"]
        kept = {a["path"] for a in el.ok("trial", "artifacts", trial, "--json").json()}
        assert {"agent/stdout.txt", "verifier/reward.txt"} <= kept
        bucket = s3_url.removeprefix("s3://").split("/")[0]
        listed = _bucket_client(s3_endpoint).list_objects_v2(Bucket=bucket, Prefix=f"team/trials/{trial}/")  # type: ignore[attr-defined]
        assert f"team/trials/{trial}/verifier/reward.txt" in {o["Key"] for o in listed["Contents"]}
    finally:
        pusher.close()


@pytest.mark.slow
def test_a_worker_that_cannot_fetch_an_archive_hands_the_trial_back_for_another_worker(
    home: Path,
    store_url: str,
    s3_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    refused_port: int,
) -> None:
    monkeypatch.setenv("ENVLOOP_DATABASE_URL", store_url)  # the SQLite file both "machines" share
    ctx = open_context(home)
    try:
        job_id = submit_command_job(ctx, tmp_path, "touch $ENVLOOP_APP_DIR/done")
        cut_off = _worker(
            tmp_path / "cut-off",
            tmp_path / "cut-off.log",
            {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{refused_port}"},
        )
        try:
            wait_for(
                lambda: "handed back to the queue" in (tmp_path / "cut-off.log").read_text(), timeout=120
            )
        finally:
            cut_off.send_signal(signal.SIGTERM)
            cut_off.wait(timeout=60)
        assert _trials(ctx, job_id)[0].status == "pending"
        connected = _worker(tmp_path / "connected", tmp_path / "connected.log")
        assert connected.wait(timeout=120) == 0
        (trial,) = _trials(ctx, job_id)
        assert (trial.status, trial.reward, trial.error_type) == ("completed", 1.0, None)
        assert trial.runs >= 2
    finally:
        ctx.close()


@pytest.mark.slow
def test_an_archive_no_worker_can_fetch_fails_its_trial_with_a_retryable_reason(
    home: Path, store_url: str, s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVLOOP_DATABASE_URL", store_url)
    ctx = open_context(home)
    try:
        job_id = submit_command_job(ctx, tmp_path, "touch $ENVLOOP_APP_DIR/done")
        worker = _worker(tmp_path / "elsewhere", tmp_path / "w.log", {"ENVLOOP_ARTIFACTS": s3_url + "-empty"})
        assert worker.wait(timeout=120) == 0
        (trial,) = _trials(ctx, job_id)
        assert (trial.status, trial.error_type, trial.runs) == ("failed", "infrastructure_error", 3)
        assert trial.error_message is not None
        assert "could not fetch the task archive on 3 runs" in trial.error_message
        assert "is not in the artifact store" in trial.error_message
        assert "retryable" in trial.error_message
    finally:
        ctx.close()
