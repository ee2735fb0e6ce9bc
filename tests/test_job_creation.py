"""A job's trials are created in batches (a 100,000-trial job never holds all its rows at once), with
every slot exactly once and every shared field as a single trial would have it; ids made in bulk are
as unique and as well ordered as ids made one at a time."""

import re
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import select

from envloop.core.ids import new_id, new_ids
from envloop.services import datasets, job_submission, profiles, trials
from envloop.services.context import Context
from envloop.store import queue
from envloop.store.tables import Trial
from tests.conftest import EXAMPLES, statements_run, write_profile
from tests.pg import BACKENDS

_ID = re.compile(r"trl_[0-9a-hjkmnp-tv-z]{22}")


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_a_job_bigger_than_one_batch_gets_every_slot_once_with_fresh_fields(
    ctx: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 5 tasks x 2 profiles x 3 attempts = 30: 5 batches
    monkeypatch.setattr(job_submission, "_TRIAL_BATCH", 7)
    datasets.push_dataset(ctx, EXAMPLES / "tasks", "demo")
    for name in ("nop", "oracle"):
        doc = profiles.read_profile_file(write_profile(tmp_path / f"{name}.json", {"AGENT_NAME": name}))
        profiles.create_profile(ctx, name, "1", doc)
    request = job_submission.JobRequest(dataset="demo@1", profiles=["nop@1", "oracle@1"], attempts=3)
    job = job_submission.submit_job(ctx, request).job

    with ctx.store.read() as session:
        rows = session.scalars(select(Trial).where(Trial.job_id == job.id)).all()
    slots = Counter((row.profile_id, row.task_name, row.attempt) for row in rows)
    assert len(slots) == 30 and set(slots.values()) == {1}
    assert {row.attempt for row in rows} == {1, 2, 3}
    assert len({row.id for row in rows}) == 30 and all(_ID.fullmatch(row.id) for row in rows)
    for row in rows:
        assert row.status == "pending"
        assert (row.dimensions, row.warnings, row.phases, row.usage) == ({}, [], [], {})
        assert (row.lease_token, row.runs, row.structured_result, row.invalidated) == (0, 0, False, False)
        assert row.created_at is not None and row.created_at.tzinfo is not None
    assert job.counts["pending"] == 30
    views = trials.list_trials(ctx, job.id)
    assert len(views) == 30 and {view.status for view in views} == {"pending"}
    assert all(view.warnings == [] for view in views)


def test_ids_made_in_bulk_are_distinct_and_sort_after_earlier_ids() -> None:
    before = new_id("trl")
    many = new_ids("trl", 20_000)
    assert len(set(many)) == 20_000
    assert all(_ID.fullmatch(one) for one in many)
    assert {one[:14] for one in many} == {many[0][:14]}  # one clock reading for the batch
    assert min(many)[:14] >= before[:14]
    assert new_ids("trl", 0) == []


def test_a_claim_looks_its_trials_up_by_key_not_through_every_pending_trial(
    ctx: Context, tmp_path: Path
) -> None:
    """SQLite plans without statistics: the claim's update must not walk the status index (every
    pending trial of every job: ~2 ms per claim with 100,000 pending) to find four trials."""
    datasets.push_dataset(ctx, EXAMPLES / "tasks", "demo")
    doc = profiles.read_profile_file(write_profile(tmp_path / "nop.json", {"AGENT_NAME": "nop"}))
    profiles.create_profile(ctx, "nop", "1", doc)
    job_submission.submit_job(
        ctx, job_submission.JobRequest(dataset="demo@1", profiles=["nop@1"], attempts=200)
    )
    with statements_run(ctx.store.engine) as ran:
        claimed = queue.claim(ctx.store, "w1", 4, lease_ttl=30)
    updates = [(sql, values) for _, sql, values in ran if sql.lstrip().upper().startswith("UPDATE TRIALS")]
    assert len(claimed) == 4 and len(updates) == 1
    statement, each = updates[0]  # one execution per trial, in one call to the driver
    assert len(each) == 4
    parameters = each[0]
    with ctx.store.engine.connect() as conn:
        plan = " ".join(
            str(row[-1]) for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
        )
    assert "sqlite_autoindex_trials_1" in plan and "ix_trials" not in plan, plan
