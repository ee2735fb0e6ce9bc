"""`envloop.Client` against a real server: the service layer's operations, same names, same models."""

import json
import threading
from pathlib import Path

import pytest

from envloop import Client as ExportedClient
from envloop.client import AccessError, Client
from envloop.errors import ConflictError, NotFoundError, UserError
from envloop.services import compare, jobs, leaderboard, results, trace, trials
from envloop.services.context import Context
from envloop.services.jobs import JobRequest
from envloop.services.profiles import read_profile_file
from envloop.services.rollouts import JobEvent, RolloutRequest, TrialEvent
from tests.api_server import Server
from tests.conftest import make_task, write_profile
from tests.pg import BACKENDS

pytestmark = pytest.mark.parametrize("store_url", BACKENDS, indirect=True)

SOLVES = 'echo "partial" > "${ENVLOOP_LOGS_DIR:-/logs}/agent/note.txt"; touch done'


def _setup(client: Client, tmp_path: Path, tasks: int = 2) -> tuple[str, str]:
    src = tmp_path / "tasks"
    for i in range(tasks):
        make_task(src, f"t{i}", solve=SOLVES)
    dataset = client.push_dataset(src, "bench")
    assert dataset.created and dataset.member_count == tasks
    oracle = read_profile_file(write_profile(tmp_path / "oracle.json", {"AGENT_NAME": "oracle"}))
    assert client.create_profile("team/oracle", "1", oracle).created
    return dataset.ref, "team/oracle@1"


def test_a_job_runs_end_to_end_through_the_client(busy_server: Server, ctx: Context, tmp_path: Path) -> None:
    client = busy_server.client()
    dataset, profile = _setup(client, tmp_path)
    submitted = client.submit_job(
        JobRequest(dataset=dataset, profiles=[profile], attempts=2, tags={"run": "a"})
    )
    job_id = submitted.job.id
    events = list(client.watch_job(job_id))
    finished = [e for e in events if isinstance(e, TrialEvent) and e.status == "completed"]
    assert {(e.task, e.attempt) for e in finished} == {("t0", 1), ("t0", 2), ("t1", 1), ("t1", 2)}
    assert isinstance(events[-1], JobEvent) and events[-1].job.status == "completed"

    assert client.get_job(job_id) == jobs.get_job(ctx, job_id)
    assert client.job_result(job_id) == results.job_result(ctx, job_id)
    assert client.job_result(job_id).profiles[profile].score == 1.0
    assert [j.id for j in client.list_jobs(status="completed", tags={"run": "a"})] == [job_id]
    assert client.list_jobs(tags={"run": "b"}) == []

    all_trials = client.list_trials(job_id)
    assert all_trials == trials.list_trials(ctx, job_id)
    assert client.list_trials(job_id, limit=3, offset=1) == all_trials[1:4]
    first = all_trials[0]
    assert client.get_trial(first.id) == trials.get_trial(ctx, first.id)
    assert client.trial_logs(first.id, "verifier") == trials.trial_logs(ctx, first.id, "verifier")
    copied = client.copy_artifacts(first.id, tmp_path / "out")
    assert copied == trials.list_artifacts(ctx, first.id)
    assert (tmp_path / "out" / "agent" / "note.txt").read_text() == "partial\n"

    assert client.invalidate_trial(first.id, "flaky host").invalidated
    assert client.job_result(job_id).profiles[profile].score_counts.invalidated == 1
    assert not client.invalidate_trial(first.id, None, undo=True).invalidated

    exported = client.export_job(job_id)
    assert exported == jobs.export_job(ctx, job_id)
    again = client.submit_job(exported)
    assert again.job.id != job_id and again.job.dataset == dataset


def test_errors_come_back_as_the_service_layers_exceptions(server: Server, tmp_path: Path) -> None:
    assert ExportedClient is Client
    client = server.client()
    dataset, profile = _setup(client, tmp_path, tasks=1)
    with pytest.raises(NotFoundError, match="unknown job 'job_nope'"):
        client.get_job("job_nope")
    with pytest.raises(NotFoundError, match="unknown dataset"):
        client.submit_job(JobRequest(dataset="missing@1", profiles=[profile]))
    with pytest.raises(UserError, match="has no task 'zzz'"):
        client.submit_job(JobRequest(dataset=dataset, profiles=[profile], tasks=["zzz"]))
    with pytest.raises(UserError, match="invalidating a trial needs a reason"):
        job_id = client.submit_job(JobRequest(dataset=dataset, profiles=[profile])).job.id
        client.invalidate_trial(client.list_trials(job_id)[0].id, None)
    client.submit_job(JobRequest(dataset=dataset, profiles=[profile], request_id="r-1"))
    with pytest.raises(ConflictError, match="already used for a different submission"):
        client.submit_job(JobRequest(dataset=dataset, profiles=[profile], attempts=2, request_id="r-1"))
    with pytest.raises(UserError, match="no such file or directory"):
        client.push_dataset(tmp_path / "absent", "x")
    with pytest.raises(AccessError, match="unknown, revoked or expired"):
        Client(server.url, "elk_wrong").list_jobs()
    assert len(client.list_jobs()) == 2


def test_a_bad_upload_is_refused_with_one_line_naming_the_task(server: Server, tmp_path: Path) -> None:
    client = server.client()
    src = tmp_path / "tasks"
    make_task(src, "good")
    (src / "stray").mkdir()
    with pytest.raises(UserError) as refused:
        client.push_dataset(src, "broken")
    assert str(refused.value) == "tasks/stray: not a task directory (no task.toml) and no task below it"
    assert client.list_datasets() == []


def test_jsonl_rows_and_same_content_pushes_behave_as_embedded(server: Server, tmp_path: Path) -> None:
    client = server.client()
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "q1", "prompt": "2+2?", "answer": "4"}) + "\n")
    first = client.push_dataset(rows, "qa", scorer="numeric")
    assert (first.ref, first.kind, first.scorer, first.created) == ("qa@1", "jsonl", "numeric", True)
    assert client.push_dataset(rows, "qa", scorer="numeric").created is False
    assert [m.name for m in client.get_dataset("qa@latest").members or []] == ["q1"]


def test_the_same_request_id_sent_concurrently_creates_exactly_one_job(
    server: Server, tmp_path: Path
) -> None:
    client = server.client()
    dataset, profile = _setup(client, tmp_path, tasks=1)
    request = JobRequest(dataset=dataset, profiles=[profile], attempts=3, request_id="once")
    seen: list[str] = []
    errors: list[BaseException] = []

    def submit() -> None:
        try:
            with Client(server.url, server.key) as own:
                seen.append(own.submit_job(request).job.id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(set(seen)) == 1 and len(seen) == 8
    assert [j.id for j in client.list_jobs()] == [seen[0]]
    assert sum(client.get_job(seen[0]).counts.values()) == 3


def test_a_rollout_is_one_trial_started_now_and_followed_to_its_end(
    busy_server: Server, tmp_path: Path
) -> None:
    client = busy_server.client()
    dataset, profile = _setup(client, tmp_path)
    rollout = client.start_rollout(RolloutRequest(dataset=dataset, task="t1", profile=profile))
    assert rollout.trial.task == "t1" and rollout.trial.status in ("pending", "running")
    job = client.get_job(rollout.job_id)
    assert job.tasks == ["t1"] and job.attempts == 1 and job.tags == {"rollout": "true"}
    events = list(client.watch_rollout(rollout.trial.id))
    assert any(isinstance(e, TrialEvent) and e.status == "completed" for e in events)
    done = client.get_rollout(rollout.trial.id)
    assert (done.trial.status, done.trial.reward) == ("completed", 1.0)
    assert done.trajectory == client.trial_steps(rollout.trial.id)
    assert [j.id for j in client.list_jobs(tags={"rollout": "true"})] == [rollout.job_id]


def test_leaderboard_comparison_and_steps_read_the_same_as_the_services(
    busy_server: Server, ctx: Context, tmp_path: Path
) -> None:
    client = busy_server.client()
    dataset, profile = _setup(client, tmp_path)
    first, second = (
        client.submit_job(
            JobRequest(dataset=dataset, profiles=[profile], attempts=2, tags={"n": str(i)})
        ).job.id
        for i in range(2)
    )
    for job_id in (first, second):
        list(client.watch_job(job_id))
    rows = client.add_to_leaderboard(first)
    assert [(r.job_id, r.profile, r.rank) for r in rows] == [(first, profile, 1)]
    client.add_to_leaderboard(second)
    assert client.show_leaderboard(dataset) == leaderboard.show_leaderboard(ctx, dataset)
    assert len(client.show_leaderboard()) == 2
    assert client.compare_runs(first, second) == compare.compare_runs(ctx, first, second)
    with pytest.raises(UserError, match="same reward"):
        client.plan_comparison(first, 0.05)
    trial = client.list_trials(first)[0]
    assert client.trial_steps(trial.id) == trace.trial_steps(ctx, trial.id)
