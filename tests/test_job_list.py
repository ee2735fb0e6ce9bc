"""`el job list` / GET /v1/jobs: filtered, ordered and paged in the database, at a cost that does not
grow with the project's history."""

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select

from envloop.core.ids import new_id
from envloop.errors import NotFoundError, UserError
from envloop.services import datasets, job_submission, jobs, profiles
from envloop.services.context import Context
from envloop.store.tables import Job, JobProfile, Trial
from tests.conftest import EXAMPLES, El, statements_run, write_profile
from tests.pg import BACKENDS


def _history(ctx: Context, tmp_path: Path, count: int) -> list[str]:
    """`count` jobs of 5 trials each (one submitted, the rest copied from it, a second apart),
    tagged team=a or team=b in turn. Returns their IDs, newest first."""
    datasets.push_dataset(ctx, EXAMPLES / "tasks", "demo")
    doc = profiles.read_profile_file(write_profile(tmp_path / "nop.json", {"AGENT_NAME": "nop"}))
    profiles.create_profile(ctx, "nop", "1", doc)
    first = job_submission.submit_job(
        ctx, job_submission.JobRequest(dataset="demo@1", profiles=["nop@1"], tags={"team": "a"})
    )
    with ctx.store.write() as session:
        job = dict(session.execute(select(Job.__table__).where(Job.id == first.job.id)).mappings().one())
        link = dict(
            session.execute(select(JobProfile.__table__).where(JobProfile.job_id == job["id"]))
            .mappings()
            .one()
        )
        trials = [
            dict(row)
            for row in session.execute(select(Trial.__table__).where(Trial.job_id == job["id"])).mappings()
        ]
        jobs_rows: list[dict[str, Any]] = []
        links: list[dict[str, Any]] = []
        trial_rows: list[dict[str, Any]] = []
        for number in range(1, count):
            job_id = new_id("job")
            jobs_rows.append(
                {
                    **job,
                    "id": job_id,
                    "request_id": None,
                    "tags": {"team": "ab"[number % 2]},
                    "created_at": job["created_at"] + timedelta(seconds=number),
                }
            )
            links.append({**link, "job_id": job_id})
            trial_rows += [{**trial, "id": new_id("trl"), "job_id": job_id} for trial in trials]
        if jobs_rows:
            session.execute(insert(Job), jobs_rows)
            session.execute(insert(JobProfile), links)
            session.execute(insert(Trial), trial_rows)
    return [row["id"] for row in reversed(jobs_rows)] + [job["id"]]


def _statements(ctx: Context, call: Any) -> tuple[Any, int]:
    with statements_run(ctx.store.engine) as ran:
        result = call()
    transaction = ("BEGIN", "COMMIT", "ROLLBACK")
    return result, sum(not sql.lstrip().upper().startswith(transaction) for _, sql, _ in ran)


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_a_page_costs_the_same_few_queries_for_10_jobs_as_for_500(
    ctx: Context, tmp_path: Path, store_url: str
) -> None:
    ids = _history(ctx, tmp_path, 500)
    page, big = _statements(ctx, lambda: jobs.list_jobs(ctx, limit=10, tags={"team": "a"}))
    assert [v.id for v in page] == [i for n, i in enumerate(ids) if n % 2 == 1 or i == ids[-1]][:10]
    assert all(v.tags == {"team": "a"} and sum(v.counts.values()) == 5 for v in page)
    assert page[0].profiles == ["nop@1"] and page[0].dataset == "demo@1"
    full, full_count = _statements(ctx, lambda: jobs.list_jobs(ctx, limit=500))
    assert len(full) == 500
    assert big <= 5 and full_count == big, (big, full_count)


def test_pages_before_a_job_cover_the_history_once_in_order(ctx: Context, tmp_path: Path) -> None:
    ids = _history(ctx, tmp_path, 23)
    seen: list[str] = []
    before = None
    while True:
        page = jobs.list_jobs(ctx, limit=10, before=before)
        if not page:
            break
        seen += [v.id for v in page]
        before = page[-1].id
    assert seen == ids


def test_a_bad_page_request_is_refused(ctx: Context, tmp_path: Path) -> None:
    _history(ctx, tmp_path, 2)
    with pytest.raises(NotFoundError, match="unknown job"):
        jobs.list_jobs(ctx, before="job_nope")
    with pytest.raises(UserError, match="limit"):
        jobs.list_jobs(ctx, limit=0)


def test_el_job_list_pages_with_before(el: El, ctx: Context, tmp_path: Path) -> None:
    ids = _history(ctx, tmp_path, 5)
    first = el.ok("job", "list", "--limit", "2", "--json").json()
    assert [v["id"] for v in first] == ids[:2]
    second = el.ok("job", "list", "--limit", "2", "--before", ids[1], "--json").json()
    assert [v["id"] for v in second] == ids[2:4]
    refused = el("job", "list", "--before", "job_nope")
    assert refused.code != 0 and "unknown job" in refused.stderr
