"""Specification of a job's samples (`services.samples`, `GET /v1/jobs/ID/samples`, `el job
samples`): one row per attempt with its input, target and output, filtered, searched, sorted and
paged in the store, on SQLite and PostgreSQL.

Trials are recorded through the store's queue as a worker records them, with the trajectory a
runner keeps written where the worker would publish it.
"""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from envloop.core.trajectory import (
    ModelRequestSummary,
    ModelStep,
    ScoreStep,
    ToolCall,
    ToolStep,
    TrajectoryRecorder,
    UserStep,
)
from envloop.core.trial import TrialError, TrialOutcome
from envloop.errors import UserError
from envloop.services import datasets, job_submission, profiles
from envloop.services.context import Context
from envloop.services.samples import SampleQuery, job_samples
from envloop.services.trial_files import PUBLISHING_SEC
from envloop.store import queue
from envloop.store.tables import Trial
from envloop.trajectories.files import write_trajectory
from tests.conftest import El, make_task, write_profile
from tests.pg import BACKENDS

ROWS = [
    {"id": "capital-france", "prompt": "What is the capital of France?", "answer": "Paris"},
    {"id": "two-plus-two", "prompt": "What is 2 + 2?", "answer": "4"},
    {"id": "percent", "prompt": "Say 100% and then _ please", "answer": "100%_"},
]
MODEL = {"MODEL_PROTOCOL": "openai", "MODEL_BASE_URL": "http://127.0.0.1:9/v1", "MODEL_NAME": "m"}
ANSWERS = {"capital-france": "The capital is Paris.", "two-plus-two": "5", "percent": "100% _"}
REWARDS = {"capital-france": 1.0, "two-plus-two": 0.0, "percent": None}


def _chat_job(ctx: Context, tmp_path: Path, attempts: int = 2) -> str:
    source = tmp_path / "qa.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    ref = datasets.push_dataset(ctx, source, "qa", scorer="exact").ref
    for name in ("team/base", "team/sft"):
        path = write_profile(tmp_path / f"{name.replace('/', '-')}.json", MODEL)
        profiles.create_profile(ctx, name, "1", profiles.read_profile_file(path))
    request = job_submission.JobRequest(
        dataset=ref, profiles=["team/base@1", "team/sft@1"], attempts=attempts
    )
    job = job_submission.submit_job(ctx, request).job.id
    request_summary = ModelRequestSummary(protocol="openai", endpoint="http://m/v1", model="m", messages=1)
    for trial in queue.claim(ctx.store, "test", 100, 3600):
        answer = ANSWERS[trial.task_name] + f" (attempt {trial.attempt})"
        recorder = TrajectoryRecorder(trial.trial_id, "envloop/chat@1", "chat")
        recorder.add(UserStep(text="prompt"))
        recorder.add(ModelStep(request=request_summary, text=answer))
        reward = REWARDS[trial.task_name]
        recorder.add(ScoreStep(scorer="exact", expected="x", answer=answer, reward=reward, explanation="e"))
        directory = ctx.artifacts.trial_dir(trial.trial_id)
        directory.mkdir(parents=True)
        write_trajectory(directory, recorder.finish("done"), [])
        usage = {"calls": 1, "input_tokens": 10 * trial.attempt, "output_tokens": 3}
        if reward is None:
            error = TrialError(type="verifier_error", message="the scorer could not decide")
            outcome = TrialOutcome(status="failed", error=error, reward_note="undecided", usage=usage)
        else:
            outcome = TrialOutcome(status="completed", reward=reward, usage=usage)
        assert queue.finish(ctx.store, trial, outcome)
    return job


pytestmark = pytest.mark.parametrize("store_url", BACKENDS, indirect=True)


def test_each_attempt_shows_its_prompt_target_and_final_answer(ctx: Context, tmp_path: Path) -> None:
    job = _chat_job(ctx, tmp_path)
    page = job_samples(ctx, job, SampleQuery())
    assert page.total == 12 and len(page.samples) == 12
    first = page.samples[0]
    assert (first.task, first.profile, first.attempt) == ("capital-france", "team/base@1", 1)
    assert first.input == "What is the capital of France?" and first.target == "Paris"
    assert first.output == "The capital is Paris. (attempt 1)"
    assert (first.reward, first.counted, first.status) == (1.0, True, "completed")
    assert (first.input_tokens, first.output_tokens) == (10, 3)
    assert first.duration_sec is not None and first.duration_sec >= 0
    undecided = next(s for s in page.samples if s.task == "percent")
    assert (
        undecided.reward is None and not undecided.counted and undecided.note == "the scorer could not decide"
    )


def test_text_search_matches_input_target_output_and_notes_case_blind_and_literally(
    ctx: Context, tmp_path: Path
) -> None:
    job = _chat_job(ctx, tmp_path)

    def found(text: str) -> set[tuple[str, int]]:
        page = job_samples(ctx, job, SampleQuery(q=text))
        return {(s.task, s.attempt) for s in page.samples}

    assert found("CAPITAL OF france") == {("capital-france", 1), ("capital-france", 2)}
    assert found("(attempt 2)") == {(t, 2) for t in ANSWERS}
    assert found("could not decide") == {("percent", 1), ("percent", 2)}
    # % and _ are text to find, not patterns: only the row that holds "100%_" matches.
    assert found("100%_") == {("percent", 1), ("percent", 2)}
    assert found("0_") == set()


def test_filters_by_status_profile_and_reward_narrow_together(ctx: Context, tmp_path: Path) -> None:
    job = _chat_job(ctx, tmp_path)

    def count(**fields: object) -> int:
        return job_samples(ctx, job, SampleQuery.model_validate(fields)).total

    assert count(status="failed") == 4 and count(status="completed") == 8
    assert count(profile="team/sft@1") == 6
    assert count(reward="counted") == 8 and count(reward="none") == 4
    assert count(min_reward=0.5) == 4 and count(max_reward=0.5) == 4
    assert count(profile="team/base@1", reward="counted", min_reward=1.0) == 2
    first = job_samples(ctx, job, SampleQuery(limit=1)).samples[0].trial_id
    with ctx.store.write() as session:
        session.execute(update(Trial).where(Trial.id == first).values(invalidated=True))
    assert count(status="invalidated") == 1 and count(reward="counted") == 7
    with pytest.raises(UserError, match="did not run profile team/other@1"):
        count(profile="team/other@1")


def test_sorting_and_paging_happen_in_the_store_with_missing_values_last(
    ctx: Context, tmp_path: Path
) -> None:
    job = _chat_job(ctx, tmp_path)
    ordered = job_samples(ctx, job, SampleQuery(sort="-reward"))
    rewards = [s.reward for s in ordered.samples]
    assert rewards == [1.0] * 4 + [0.0] * 4 + [None] * 4
    ascending = [s.reward for s in job_samples(ctx, job, SampleQuery(sort="reward")).samples]
    assert ascending == [0.0] * 4 + [1.0] * 4 + [None] * 4
    tokens = [s.input_tokens for s in job_samples(ctx, job, SampleQuery(sort="-tokens")).samples]
    assert tokens == sorted(tokens, reverse=True)
    pages = [job_samples(ctx, job, SampleQuery(limit=5, offset=offset)) for offset in (0, 5, 10)]
    assert [len(p.samples) for p in pages] == [5, 5, 2] and all(p.total == 12 for p in pages)
    ids = [s.trial_id for p in pages for s in p.samples]
    assert ids == [s.trial_id for s in job_samples(ctx, job, SampleQuery()).samples]


def test_an_agents_output_is_its_last_message_or_its_own_output(ctx: Context, tmp_path: Path) -> None:
    make_task(tmp_path / "tasks", "hello", solve="touch done")
    ref = datasets.push_dataset(ctx, tmp_path / "tasks", "agentic").ref
    path = write_profile(tmp_path / "agent.json", {"AGENT_NAME": "nop"})
    profiles.create_profile(ctx, "team/agent", "1", profiles.read_profile_file(path))
    job = job_submission.submit_job(
        ctx, job_submission.JobRequest(dataset=ref, profiles=["team/agent@1"], attempts=3)
    ).job.id
    summary = ModelRequestSummary(protocol="openai", endpoint="http://m/v1", model="m", messages=1)
    for trial in queue.claim(ctx.store, "test", 100, 3600):
        directory = ctx.artifacts.trial_dir(trial.trial_id)
        directory.mkdir(parents=True)
        if trial.attempt == 1:  # finished with the finish tool's summary after a last message
            recorder = TrajectoryRecorder(trial.trial_id, "envloop/shell@1", "envloop")
            call = ToolCall(id="c1", name="finish", arguments={"summary": "created done"})
            recorder.add(ModelStep(request=summary, text="All set.", tool_calls=[call]))
            recorder.add(ToolStep(call_id="c1", tool="finish", stdout="created done"))
            write_trajectory(directory, recorder.finish("done"), [])
        elif trial.attempt == 2:  # an agent without a trajectory: the end of its own output
            (directory / "agent").mkdir()
            (directory / "agent" / "stdout.txt").write_text("x" * 10_000 + "\nfinal line\n")
        assert queue.finish(ctx.store, trial, TrialOutcome(status="completed", reward=1.0))
    outputs = {s.attempt: s.output for s in job_samples(ctx, job, SampleQuery()).samples}
    assert outputs[1] == "created done"
    assert outputs[2] is not None and outputs[2].endswith("final line") and len(outputs[2]) <= 4000
    assert outputs[3] is None  # nothing kept (yet): looked for again on the next read
    assert job_samples(ctx, job, SampleQuery(q="Do the hello thing")).total == 3  # the instruction
    # A trial that kept nothing long after it finished is not looked for again.
    with ctx.store.write() as session:
        past = datetime.now(UTC) - timedelta(seconds=PUBLISHING_SEC + 5)
        session.execute(update(Trial).where(Trial.job_id == job).values(finished_at=past))
    job_samples(ctx, job, SampleQuery())
    third = next(s for s in job_samples(ctx, job, SampleQuery()).samples if s.attempt == 3)
    late = ctx.artifacts.trial_dir(third.trial_id) / "agent"
    late.mkdir(parents=True)
    (late / "stdout.txt").write_text("too late\n")
    assert next(s.output for s in job_samples(ctx, job, SampleQuery()).samples if s.attempt == 3) is None


def test_the_cli_prints_samples_and_refuses_a_bad_option_in_one_line(
    el: El, ctx: Context, tmp_path: Path
) -> None:
    job = _chat_job(ctx, tmp_path)
    text = el.ok("job", "samples", job, "-q", "capital", "--profile", "team/sft@1").stdout
    assert "What is the capital of France?" in text and "The capital is Paris. (attempt 1)" in text
    assert "two-plus-two" not in text
    undecided = el.ok("job", "samples", job, "-q", "percent", "--limit", "1").stdout.splitlines()
    header, row = undecided[0].split(), undecided[1]
    assert header[header.index("reward") + 1] == "why"  # the note has its own column, not the reward's
    assert "missing  the scorer could not decide" in row and "100% _ (attempt" in row
    data = el.ok("job", "samples", job, "--sort", "-reward", "--limit", "3", "--json").json()
    assert data["total"] == 12 and [s["reward"] for s in data["samples"]] == [1.0] * 3
    refused = el("job", "samples", job, "--sort", "sideways")
    assert refused.code == 2 and refused.stderr.startswith("el: error: --sort:")
    assert refused.stderr.count("\n") == 1
