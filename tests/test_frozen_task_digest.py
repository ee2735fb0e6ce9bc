"""A worker's trial loads the store's frozen copy of its task under the digest the store keeps it
by, without hashing its files again; a copy from anywhere else is hashed as before."""

from pathlib import Path

import pytest
from sqlalchemy import select

from envloop.runners import shell
from envloop.services.context import Context
from envloop.store.tables import Trial
from envloop.tasks import harbor
from envloop.tasks.digest import task_digest
from tests.conftest import make_task, run_trials, submit_command_job


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every directory `load_harbor_task` hashes, from a fresh parse cache."""
    seen: list[Path] = []

    def counting(root: Path) -> str:
        seen.append(root.resolve())
        return task_digest(root)

    monkeypatch.setattr(harbor, "task_digest", counting)
    shell._frozen_task.cache_clear()
    shell._frozen_features.cache_clear()
    return seen


def test_a_workers_trial_takes_its_tasks_digest_from_the_store_and_hashes_no_frozen_copy(
    ctx: Context, tmp_path: Path, hashed: list[Path]
) -> None:
    job_id = submit_command_job(ctx, tmp_path, "true", tasks=3)
    run_trials(ctx, 3)
    with ctx.store.read() as session:
        trials = session.scalars(select(Trial).where(Trial.job_id == job_id)).all()
    assert [t.status for t in trials] == ["completed"] * 3
    cache = (ctx.artifacts.root / "task-cache").resolve()
    assert not [root for root in hashed if root.is_relative_to(cache)]
    for trial in trials:  # the digest taken is the one the copy's files have
        assert task_digest(ctx.artifacts.task_dir(trial.task_digest)) == trial.task_digest


def test_a_task_directory_given_without_its_digest_is_hashed(tmp_path: Path, hashed: list[Path]) -> None:
    root = make_task(tmp_path, "t")
    assert harbor.load_harbor_task(root).digest == task_digest(root)
    assert hashed == [root.resolve()]
