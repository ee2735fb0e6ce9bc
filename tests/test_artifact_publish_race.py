"""Two workers on one machine may publish the same run at once: the worker that recorded it, and a
worker starting up that finds it staged and recorded (and takes its worker for dead). Whichever
comes second must find it published, never take the first one's publication apart: in a local
store (renames) and in a remote one (uploads, then the trial's other objects removed)."""

import multiprocessing
import multiprocessing.synchronize
from collections.abc import Iterator
from pathlib import Path

import pytest

from envloop.store.artifacts import ArtifactStore, open_artifact_store
from tests import s3


def _publish(
    setting: str, home: str, run_id: str, trial_id: str, start: multiprocessing.synchronize.Barrier
) -> None:
    store = open_artifact_store(setting, Path(home))
    start.wait()
    store.publish(run_id, trial_id)


def _race(store: ArtifactStore, setting: str, home: Path, rounds: int) -> int:
    """Publish `rounds` runs, each by two processes at once; how many lost their files."""
    context = multiprocessing.get_context("fork")
    lost = 0
    for number in range(rounds):
        run_id, trial_id = f"trl_{number}.r1", f"trl_{number}"
        staged = store.staging_dir(run_id)
        (staged / "verifier").mkdir(parents=True)
        (staged / "verifier" / "reward.txt").write_text("1")
        start = context.Barrier(2)
        racers = [
            context.Process(target=_publish, args=(setting, str(home), run_id, trial_id, start))
            for _ in range(2)
        ]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join(60)
        assert [racer.exitcode for racer in racers] == [0, 0]
        if [info.path for info in store.list_trial(trial_id)] != ["verifier/reward.txt"]:
            lost += 1
    return lost


def test_a_run_published_by_two_processes_at_once_keeps_its_files(tmp_path: Path) -> None:
    setting = str(tmp_path / "artifacts")
    store = open_artifact_store(setting, tmp_path)
    assert _race(store, setting, tmp_path, rounds=150) == 0
    assert store.staged_runs() == []


@pytest.fixture
def s3_setting(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with s3.server() as endpoint:
        bucket, env = s3.bucket_env(endpoint)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        yield f"s3://{bucket}/team"


@pytest.mark.slow
def test_a_run_uploaded_by_two_processes_at_once_keeps_its_objects(tmp_path: Path, s3_setting: str) -> None:
    store = open_artifact_store(s3_setting, tmp_path)
    assert _race(store, s3_setting, tmp_path, rounds=30) == 0
    assert store.staged_runs() == []
