"""What `queue.settle` writes on the driver's cursor reads back as if SQLAlchemy had written it, on
both backends: the same stored text for every result column, the outcome's values through the ORM,
nothing from a stale lease, nothing left behind when the transaction fails."""

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, cast, select, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.types import Text

from envloop.core.destinations import Destinations
from envloop.core.trial import PhaseRecord, TrialError, TrialFlag, TrialOutcome
from envloop.services import jobs
from envloop.services.context import Context
from envloop.store import queue
from envloop.store.cursor_statements import CursorStatement
from envloop.store.tables import Job, Trial
from tests.conftest import submit_nop_job
from tests.pg import BACKENDS

pytestmark = pytest.mark.parametrize("store_url", BACKENDS, indirect=True)

FINISHED_AT = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
OUTCOME = TrialOutcome(
    status="failed",
    error=TrialError(type="verifier_error", message="quote ' and ünïcode", exit_code=3),
    reward=0.25,
    dimensions={"accuracy": 0.5, "speed": 1.0},
    sandbox="docker",
    sandbox_note=None,
    phases=[
        PhaseRecord(
            name="agent",
            started_at=datetime(2026, 3, 4, 5, 0, tzinfo=UTC),
            ended_at=datetime(2026, 3, 4, 5, 1, 30, 5, tzinfo=UTC),
            exit_code=0,
        )
    ],
    warnings=["a warning"],
    usage={"calls": 2, "input_tokens": 10},
    stop_reason="max_steps",
    structured_result=True,
    flags=[TrialFlag(kind="tamper", detail="binary on PATH", paths=["/usr/bin/x"])],
)
BARE_OUTCOME = TrialOutcome(status="completed")
"""Every optional value left out: NULLs, empty JSON, no destinations."""


class _FixedClock(datetime):
    @classmethod
    def now(cls, tz: Any = None) -> "_FixedClock":
        return cls.fromtimestamp(FINISHED_AT.timestamp(), tz)


def _written_by_sqlalchemy(ctx: Context, trial: queue.ClaimedTrial, outcome: TrialOutcome) -> None:
    """The same result as `settle` records, through SQLAlchemy's own execution."""
    error = outcome.error
    with ctx.store.write_connection() as conn:
        conn.execute(
            update(Trial)
            .where(Trial.id == trial.trial_id)
            .values(
                status=outcome.status,
                error_type=error.type if error else None,
                error_message=error.message if error else None,
                exit_code=error.exit_code if error else None,
                reward=outcome.reward,
                reward_note=outcome.reward_note,
                dimensions=outcome.dimensions,
                sandbox=outcome.sandbox,
                sandbox_note=outcome.sandbox_note,
                warnings=outcome.warnings,
                phases=[p.model_dump(mode="json") for p in outcome.phases],
                usage=outcome.usage,
                stop_reason=outcome.stop_reason,
                structured_result=outcome.structured_result,
                flags=[f.model_dump(mode="json") for f in outcome.flags],
                destinations=outcome.destinations and outcome.destinations.model_dump(mode="json"),
                finished_at=FINISHED_AT,
                lease_owner=None,
                lease_expires_at=None,
            )
        )


RECORDED_COLUMNS = (
    "status", "error_type", "error_message", "exit_code", "reward", "reward_note", "dimensions",
    "sandbox", "sandbox_note", "warnings", "phases", "usage", "stop_reason", "structured_result",
    "flags", "destinations", "finished_at", "lease_owner", "lease_expires_at", "lease_token",
)  # fmt: skip


def _stored_text(ctx: Context, trial_id: str, names: tuple[str, ...] | None = None) -> dict[str, str | None]:
    """The trial's columns (all of them unless `names`) as the database holds them, as text."""
    table = Trial.__table__
    chosen = names or tuple(table.c.keys())
    with ctx.store.engine.connect() as conn:
        row = conn.execute(
            select(*(cast(table.c[name], Text) for name in chosen)).where(Trial.id == trial_id)
        ).one()
    return dict(zip(chosen, row, strict=True))


@pytest.mark.parametrize("outcome", [OUTCOME, BARE_OUTCOME], ids=["full", "bare"])
def test_a_recorded_result_is_stored_exactly_as_sqlalchemy_stores_it(
    ctx: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outcome: TrialOutcome
) -> None:
    submit_nop_job(ctx, tmp_path, tasks=2, attempts=1)
    mine, theirs = queue.claim(ctx.store, "w1", 2, lease_ttl=30)
    monkeypatch.setattr(queue, "datetime", _FixedClock)
    assert queue.settle(ctx.store, "w1", [(mine, outcome)], 0, 30) == ([True], [])
    _written_by_sqlalchemy(ctx, theirs, outcome)
    settled = _stored_text(ctx, mine.trial_id, RECORDED_COLUMNS)
    assert settled == _stored_text(ctx, theirs.trial_id, RECORDED_COLUMNS)
    assert settled["finished_at"] is not None and settled["destinations"] == "null"


def test_a_recorded_result_reads_back_through_the_orm(ctx: Context, tmp_path: Path) -> None:
    submit_nop_job(ctx, tmp_path, tasks=1, attempts=1)
    (trial,) = queue.claim(ctx.store, "w1", 1, lease_ttl=30)
    before = datetime.now(UTC)
    assert queue.finish(
        ctx.store,
        trial,
        OUTCOME.model_copy(update={"destinations": Destinations(listed=[], more_requests=2)}),
    )
    with ctx.store.read() as session:
        row = session.scalars(select(Trial).where(Trial.id == trial.trial_id)).one()
    assert (row.status, row.error_type, row.error_message, row.exit_code) == (
        "failed",
        "verifier_error",
        "quote ' and ünïcode",
        3,
    )
    assert (row.reward, row.reward_note, row.sandbox, row.sandbox_note, row.stop_reason) == (
        0.25,
        None,
        "docker",
        None,
        "max_steps",
    )
    assert (row.dimensions, row.warnings, row.usage) == (OUTCOME.dimensions, OUTCOME.warnings, OUTCOME.usage)
    assert row.phases == [p.model_dump(mode="json") for p in OUTCOME.phases]
    assert row.flags == [f.model_dump(mode="json") for f in OUTCOME.flags]
    assert row.destinations == Destinations(listed=[], more_requests=2).model_dump(mode="json")
    assert row.structured_result is True
    assert row.finished_at is not None and before <= row.finished_at <= datetime.now(UTC)
    assert (row.lease_owner, row.lease_expires_at, row.lease_token) == (None, None, trial.lease_token)


def test_a_claim_reads_back_through_the_orm(ctx: Context, tmp_path: Path) -> None:
    job_id = submit_nop_job(ctx, tmp_path, tasks=1, attempts=1)
    before = datetime.now(UTC)
    (trial,) = queue.claim(ctx.store, "w1", 1, lease_ttl=30)
    with ctx.store.read() as session:
        row = session.scalars(select(Trial).where(Trial.id == trial.trial_id)).one()
        job_status = session.scalar(select(Job.status).where(Job.id == job_id))
    assert (row.status, row.lease_owner, row.lease_token, row.runs) == ("running", "w1", 1, 1)
    assert trial.lease_token == row.lease_token and trial.task_name == row.task_name == "t0"
    assert row.lease_expires_at is not None and time.time() + 29 < row.lease_expires_at <= time.time() + 30
    assert row.started_at is not None and before <= row.started_at <= datetime.now(UTC)
    assert job_status == "running"


def test_a_stale_lease_token_records_nothing(ctx: Context, tmp_path: Path) -> None:
    job_id = submit_nop_job(ctx, tmp_path, tasks=1, attempts=1)
    (trial,) = queue.claim(ctx.store, "w1", 1, lease_ttl=30)
    stale = queue.ClaimedTrial(**{**vars(trial), "lease_token": trial.lease_token - 1})
    untouched = _stored_text(ctx, trial.trial_id)
    assert queue.settle(ctx.store, "w1", [(stale, OUTCOME)], 0, 30) == ([False], [])
    assert _stored_text(ctx, trial.trial_id) == untouched
    assert jobs.get_job(ctx, job_id).status == "running"


def test_claims_on_the_cursor_honour_each_jobs_concurrency_and_share_fairly(
    ctx: Context, tmp_path: Path
) -> None:
    capped = submit_nop_job(ctx, tmp_path, tasks=4, attempts=1, concurrency=1)
    free = submit_nop_job(ctx, tmp_path, tasks=4, attempts=1)
    first = queue.claim(ctx.store, "w1", 3, lease_ttl=30)
    assert sorted(c.job_id for c in first) == sorted([capped, free, free])
    recorded, more = queue.settle(ctx.store, "w1", [(first[0], BARE_OUTCOME)], 3, lease_ttl=30)
    assert recorded == [True]
    running = [c.job_id for c in first[1:] + more]
    assert running.count(capped) == 1 and len(running) == 5


def test_a_failed_settle_leaves_nothing_of_what_it_wrote_on_the_cursor(
    ctx: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    submit_nop_job(ctx, tmp_path, tasks=2, attempts=1)
    (trial,) = queue.claim(ctx.store, "w1", 1, lease_ttl=30)
    untouched = _stored_text(ctx, trial.trial_id)

    def claim_fails(*_: object) -> list[queue.ClaimedTrial]:
        raise RuntimeError("the claim failed")

    monkeypatch.setattr(queue, "_claim", claim_fails)
    with pytest.raises(RuntimeError):
        queue.settle(ctx.store, "w1", [(trial, OUTCOME)], 1, 30)
    assert _stored_text(ctx, trial.trial_id) == untouched


def test_a_driver_error_on_the_cursor_is_raised_as_sqlalchemy_raises_it(ctx: Context) -> None:
    missing = CursorStatement(select(Table("no_such_table", MetaData(), Column("x", Integer))))
    with pytest.raises(DBAPIError) as raised, ctx.store.write_connection() as conn:
        missing.rows(conn)
    assert "no_such_table" in str(raised.value.orig) and raised.value.statement is not None


def test_rows_read_on_the_cursor_are_those_sqlalchemy_returns(ctx: Context, tmp_path: Path) -> None:
    submit_nop_job(ctx, tmp_path, tasks=2, attempts=1)
    (trial,) = queue.claim(ctx.store, "w1", 1, lease_ttl=30)
    assert queue.finish(ctx.store, trial, OUTCOME)
    statement = select(
        Trial.status, Trial.error_type, Trial.finished_at, Trial.dimensions, Trial.reward
    ).order_by(Trial.task_name)
    with ctx.store.engine.connect() as conn:
        expected = [tuple(row) for row in conn.execute(statement)]
        on_the_cursor = CursorStatement(statement).rows(conn)
    assert on_the_cursor == expected
    assert [[type(value) for value in row] for row in on_the_cursor] == [
        [type(value) for value in row] for row in expected
    ]
    assert on_the_cursor[0][2] is not None and on_the_cursor[0][2].tzinfo is not None
