"""Reads of the embedded store with `sqlite3` alone (`envloop.store.light`) give what the same
queries give through SQLAlchemy, and the store opens that way only when it needs nothing done."""

import asyncio
import importlib
import json
import pkgutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from envloop.errors import NotFoundError, UserError
from envloop.scheduling.worker import Worker, WorkerConfig
from envloop.services import diagnosis, job_reads, results, trial_reads, trials, usage
from envloop.services.context import DATABASE_FILE, Context, open_context
from envloop.services.failures import rewarded_by_profiles
from envloop.services.reads import READ_MODULES
from envloop.store import light as light_store
from envloop.store.light import CACHE_FILE, Compiled, SqliteReads, compile_sqlite, open_light
from envloop.store.reads import Query, SessionReads, declared_queries
from tests.conftest import submit_command_job


def finished_job(ctx: Context, tmp_path: Path) -> str:
    """Two tasks, two attempts each: the command passes on t0 and fails on t1's verifier."""
    job_id = submit_command_job(ctx, tmp_path, "true", tasks=2, attempts=2)
    worker = Worker(ctx, WorkerConfig(capacity=2, idle_poll=0.01))
    asyncio.run(worker.run(until=lambda: worker.completed >= 4))
    return job_id


def test_a_light_context_answers_every_read_of_el_job_get_and_result_as_the_full_store_does(
    ctx: Context, home: Path, tmp_path: Path
) -> None:
    job_id = finished_job(ctx, tmp_path)
    light = open_context(home, light=True)
    try:
        assert light._light is not None and light._store is None
        for read in (job_reads.get_job, results.job_result, diagnosis.job_diagnosis, usage.job_usage):
            results._cache.clear()
            usage._sums.clear()
            assert read(light, job_id).model_dump() == read(ctx, job_id).model_dump()
        assert light._store is None, "no read opened the full store"
    finally:
        light.close()


def test_a_light_context_reads_a_trial_its_logs_and_files_as_the_full_store_does(
    ctx: Context, home: Path, tmp_path: Path
) -> None:
    job_id = finished_job(ctx, tmp_path)
    light = open_context(home, light=True)
    try:
        for trial in trials.list_trials(ctx, job_id):
            assert trial_reads.get_trial(light, trial.id) == trial_reads.get_trial(ctx, trial.id)
            assert trial_reads.get_trial(light, trial.id).model_dump(
                exclude={"structured"}
            ) == trial.model_dump(exclude={"structured"})
            for phase in ("agent", "verifier"):
                assert trial_reads.trial_logs(light, trial.id, phase) == trial_reads.trial_logs(
                    ctx, trial.id, phase
                )
            assert trial_reads.list_artifacts(light, trial.id) == trial_reads.list_artifacts(ctx, trial.id)
        assert light._store is None, "no read opened the full store"
    finally:
        light.close()


def test_a_light_context_lists_a_jobs_trials_filtered_and_paged_as_the_full_store_does(
    ctx: Context, home: Path, tmp_path: Path
) -> None:
    job_id = finished_job(ctx, tmp_path)
    light = open_context(home, light=True)
    try:
        asks: list[dict[str, Any]] = [
            {},
            {"status": "completed"},
            {"status": "pending"},
            {"task": "t1"},
            {"task": "t1", "status": "completed", "limit": 1, "offset": 1},
            {"limit": 3},
            {"offset": 2},
            {"limit": 2, "offset": 9},
        ]
        for ask in asks:
            full = trials.list_trials(ctx, job_id, **ask)
            assert trial_reads.list_trials(light, job_id, **ask) == full, ask
        assert len(trial_reads.list_trials(light, job_id)) == 4
        assert [t.task for t in trial_reads.list_trials(light, job_id, task="t1")] == ["t1", "t1"]
        with pytest.raises(NotFoundError, match="unknown job 'job_missing'"):
            trial_reads.list_trials(light, "job_missing")
        with pytest.raises(UserError, match="unknown trial status 'done'"):
            trial_reads.list_trials(light, job_id, status="done")
        assert light._store is None, "no read opened the full store"
    finally:
        light.close()


def test_rows_have_the_types_sqlalchemy_gives_them(ctx: Context, home: Path, tmp_path: Path) -> None:
    job_id = finished_job(ctx, tmp_path)
    light = open_light(home / DATABASE_FILE, home)
    assert light is not None
    try:
        with ctx.store.read() as session, light.reads() as sqlite_reads:
            full = SessionReads(session).first(job_reads.job_by_id, job_id=job_id)
            bare = sqlite_reads.first(job_reads.job_by_id, job_id=job_id)
        assert tuple(bare) == tuple(full)
        assert [type(value) for value in bare] == [type(value) for value in full]
        assert bare.created_at.tzinfo is not None and isinstance(bare.tasks, list)
        assert isinstance(bare.cancel_requested, bool)
    finally:
        light.close()


def test_a_list_parameter_may_be_empty_or_long(ctx: Context, home: Path, tmp_path: Path) -> None:
    finished_job(ctx, tmp_path)
    light = open_light(home / DATABASE_FILE, home)
    assert light is not None
    try:
        with light.reads() as reads:
            assert isinstance(reads, SqliteReads)
            assert reads.rows(rewarded_by_profiles, profile_ids=[], digests=["x"]) == []
            profile_ids = [f"prf_{n}" for n in range(500)]
            assert reads.rows(rewarded_by_profiles, profile_ids=profile_ids, digests=[]) == []
    finally:
        light.close()


def test_compiled_queries_are_kept_and_recompiled_when_their_fingerprint_changes(
    ctx: Context, home: Path, tmp_path: Path
) -> None:
    job_id = finished_job(ctx, tmp_path)
    light = open_context(home, light=True)
    job_reads.get_job(light, job_id)
    light.close()
    cache = home / CACHE_FILE
    assert cache.stat().st_mode & 0o777 == 0o600
    entries = json.loads(cache.read_text())
    name = job_reads.job_by_id.name
    assert "FROM jobs" in entries[name]["sql"]
    entries[name] = {**entries[name], "fingerprint": "stale", "sql": "SELECT 'stale'"}
    cache.write_text(json.dumps(entries))
    light = open_context(home, light=True)
    try:
        assert job_reads.get_job(light, job_id).id == job_id
    finally:
        light.close()
    assert json.loads(cache.read_text())[name]["fingerprint"] == job_reads.job_by_id.fingerprint


def test_a_store_behind_the_current_schema_is_not_read_lightly(ctx: Context, home: Path) -> None:
    assert open_light(home / "missing.db", home) is None
    with sqlite3.connect(home / DATABASE_FILE) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0001'")
    assert open_light(home / DATABASE_FILE, home) is None


def test_a_new_home_is_created_and_migrated_in_full_and_its_reads_compiled(tmp_path: Path) -> None:
    fresh = open_context(tmp_path / "new-home", light=True)
    try:
        assert fresh._light is None and fresh._store is not None
        assert (tmp_path / "new-home" / DATABASE_FILE).is_file()
    finally:
        fresh.close()
    entries = json.loads((tmp_path / "new-home" / CACHE_FILE).read_text())
    assert {q.name: q.fingerprint for q in declared_queries()} == {
        name: entry["fingerprint"] for name, entry in entries.items()
    }


def test_a_stale_query_is_compiled_again_with_every_other_one_missing(
    ctx: Context, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = finished_job(ctx, tmp_path)
    compiled: list[str] = []

    def counted(query: Query) -> Compiled:
        compiled.append(query.name)
        return compile_sqlite(query)

    monkeypatch.setattr(light_store, "compile_sqlite", counted)
    cache = home / CACHE_FILE
    entries = json.loads(cache.read_text())
    gone = trial_reads.trial_page.name
    del entries[gone]
    entries[job_reads.job_by_id.name]["fingerprint"] = "stale"
    cache.write_text(json.dumps(entries))
    light = open_context(home, light=True)
    try:
        job_reads.get_job(light, job_id)
    finally:
        light.close()
    refilled = json.loads(cache.read_text())
    assert refilled[job_reads.job_by_id.name]["fingerprint"] == job_reads.job_by_id.fingerprint
    assert refilled[gone]["fingerprint"] == trial_reads.trial_page.fingerprint
    assert sorted(compiled) == sorted([job_reads.job_by_id.name, gone])  # each once, nothing else


def test_every_module_that_declares_a_read_is_one_the_cache_is_filled_from() -> None:
    """READ_MODULES is kept by hand: a read declared elsewhere would be compiled only when first run."""
    import envloop.services  # noqa: PLC0415
    import envloop.store  # noqa: PLC0415

    for package in (envloop.services, envloop.store):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            importlib.import_module(module.name)
    assert {q.build.__module__ for q in declared_queries()} == set(READ_MODULES)


def test_a_write_through_a_light_context_opens_the_full_store(
    ctx: Context, home: Path, tmp_path: Path
) -> None:
    job_id = submit_command_job(ctx, tmp_path, "true")
    light = open_context(home, light=True)
    try:
        from envloop.services import jobs  # noqa: PLC0415

        assert jobs.cancel_job(light, job_id).cancel_requested
        assert light._store is not None
        assert job_reads.get_job(light, job_id).cancel_requested
    finally:
        light.close()
