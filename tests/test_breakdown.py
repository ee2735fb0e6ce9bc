"""Specification of breakdowns by task metadata (`services.breakdown`, `el job result --by`, the
API and the console's job page): each group of tasks sharing a value gets the job's own metrics,
with coverage; a list value puts the task in each of its groups (and says so); tasks without the
field form a group of their own, never dropped."""

import json
from pathlib import Path

import pytest

from envloop.core.trial import TrialOutcome
from envloop.errors import UserError
from envloop.services import datasets, job_submission, profiles
from envloop.services.breakdown import job_breakdown, metadata_fields
from envloop.services.context import Context
from envloop.store import queue
from envloop.wire.jobs import JobRequest
from tests.conftest import El, make_task, publish_profile, run_job_in_process, write_profile
from tests.pg import BACKENDS

ROWS = [
    {
        "id": "a",
        "prompt": "p",
        "answer": "x",
        "metadata": {"topic": "geo", "tags": ["easy", "map"], "level": 1},
    },
    {"id": "b", "prompt": "p", "answer": "x", "metadata": {"topic": "geo", "tags": ["hard"], "level": 2}},
    {"id": "c", "prompt": "p", "answer": "x", "metadata": {"topic": "math", "tags": ["easy"], "level": 1}},
    {"id": "d", "prompt": "p", "answer": "x"},
]
REWARDS = {("a", 1): 1.0, ("a", 2): 0.0, ("b", 1): 1.0, ("b", 2): None, ("c", 1): 0.0, ("c", 2): 0.0}
MODEL = {"MODEL_PROTOCOL": "openai", "MODEL_BASE_URL": "http://127.0.0.1:9/v1", "MODEL_NAME": "m"}


def _job(ctx: Context, tmp_path: Path) -> str:
    source = tmp_path / "qa.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    ref = datasets.push_dataset(ctx, source, "qa").ref
    profiles.create_profile(
        ctx, "team/m", "1", profiles.read_profile_file(write_profile(tmp_path / "m.json", MODEL))
    )
    job = job_submission.submit_job(
        ctx, job_submission.JobRequest(dataset=ref, profiles=["team/m@1"], attempts=2)
    ).job.id
    for trial in queue.claim(ctx.store, "test", 100, 3600):
        key = (trial.task_name, trial.attempt)
        if key in REWARDS:  # task d stays running: its attempts are missing
            outcome = TrialOutcome(status="completed", reward=REWARDS[key], reward_note="none")
            assert queue.finish(ctx.store, trial, outcome)
    return job


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_each_value_gets_the_jobs_metrics_over_its_tasks_with_coverage(ctx: Context, tmp_path: Path) -> None:
    job = _job(ctx, tmp_path)
    assert metadata_fields(ctx, job) == ["level", "tags", "topic"]
    found = job_breakdown(ctx, job, "topic")
    assert not found.multi_valued
    assert [(g.value, g.tasks) for g in found.groups] == [("geo", ["a", "b"]), ("math", ["c"]), (None, ["d"])]
    geo, math, unset = (g.profiles["team/m@1"] for g in found.groups)
    assert (
        geo.score == pytest.approx(2 / 3)
        and geo.coverage == "score 66.7%, 3/4 attempts scored, 1/2 members complete"
    )
    assert math.score == 0.0 and math.score_counts.complete_members == 1
    assert unset.score is None and unset.score_counts.missing == 2  # never read as zero
    levels = job_breakdown(ctx, job, "level")
    assert [g.value for g in levels.groups] == ["1", "2", None]


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_a_list_value_puts_the_task_in_each_of_its_groups_and_says_so(ctx: Context, tmp_path: Path) -> None:
    job = _job(ctx, tmp_path)
    found = job_breakdown(ctx, job, "tags")
    assert found.multi_valued
    assert {g.value: g.tasks for g in found.groups} == {
        "easy": ["a", "c"],
        "hard": ["b"],
        "map": ["a"],
        None: ["d"],
    }
    easy = next(g for g in found.groups if g.value == "easy").profiles["team/m@1"]
    assert easy.score == pytest.approx(1 / 4)


def test_an_unknown_field_is_refused_naming_the_fields_there_are(ctx: Context, tmp_path: Path) -> None:
    job = _job(ctx, tmp_path)
    with pytest.raises(UserError, match=r"sets metadata field 'difficulty' \(fields: level, tags, topic\)"):
        job_breakdown(ctx, job, "difficulty")


def test_el_job_result_by_a_task_toml_metadata_field(el: El, ctx: Context, tmp_path: Path) -> None:
    for name, category in (("t1", "files"), ("t2", "files"), ("t3", "text")):
        make_task(tmp_path / "tasks", name, solve="touch done", toml=f'[metadata]\ncategory = "{category}"\n')
    dataset = datasets.push_dataset(ctx, tmp_path / "tasks", "cats").ref
    profile = publish_profile(ctx, tmp_path / "oracle.json", "team/oracle", {"AGENT_NAME": "oracle"})
    job = {"id": run_job_in_process(ctx, JobRequest(dataset=dataset, profiles=[profile]))}
    text = el.ok("job", "result", job["id"], "--by", "category").stdout
    assert "By category" in text
    assert "files" in text and "score 100%, 2/2 attempts scored, 2/2 members complete" in text
    assert "score 100%, 1/1 attempts scored, 1/1 members complete" in text
    data = el.ok("job", "result", job["id"], "--by", "category", "--json").json()
    assert [g["value"] for g in data["breakdown"]["groups"]] == ["files", "text"]
    refused = el("job", "result", job["id"], "--by", "colour")
    assert refused.code == 2 and "(fields: category)" in refused.stderr
