"""Results survive hostile verifier output and hostile task content: one trial's absurd reward or
deeply nested file never takes down a job's metrics, a trial's page or a push."""

import json
from pathlib import Path

from envloop.services.context import Context
from tests.api_server import Server
from tests.conftest import EXAMPLES, El
from tests.test_compare_support import make_profile, push_tasks, run_job

DEEP = "[" * 200_000 + "]" * 200_000


def _one_line(result: object) -> str:
    stderr = result.stderr.strip()  # type: ignore[attr-defined]
    assert result.code == 2, stderr  # type: ignore[attr-defined]
    assert len(stderr.splitlines()) == 1 and "Traceback" not in stderr, stderr
    return stderr


def test_a_stored_reward_that_would_overflow_every_sum_leaves_the_rest_of_the_job_counted(
    el: El, ctx: Context, tmp_path: Path
) -> None:
    """A store written before rewards were bounded may hold 1e308: that trial counts as without a
    reward, the others still give the job its metrics."""
    dataset = push_tasks(ctx, tmp_path, "huge", ["t1", "t2", "t3"])
    profile = make_profile(ctx, tmp_path, "team/huge")
    job = run_job(ctx, dataset, [profile], 2, lambda _p, t, a: 1e308 if (t, a) == ("t1", 1) else 1.0)
    result = el.ok("job", "result", job, "--json").json()["profiles"][profile]
    assert result["score"] == 1.0
    assert result["score_counts"]["scored"] == 5 and result["score_counts"]["invalid"] == 1
    assert "score 100%, 5/6 attempts scored" in el.ok("job", "result", job).stdout


def test_a_result_json_nested_two_hundred_thousand_levels_is_reported_invalid_not_a_crash(
    el: El, ctx: Context, tmp_path: Path
) -> None:
    dataset = push_tasks(ctx, tmp_path, "nested", ["t1", "t2"])
    profile = make_profile(ctx, tmp_path, "team/nested")
    job = run_job(ctx, dataset, [profile], 1, lambda *_: 1.0, structured=lambda *_: DEEP)
    trial = el.ok("trial", "list", "--job", job, "--json").json()[0]["id"]
    detail = el.ok("trial", "get", trial, "--json").json()
    assert detail["structured"]["error"] == "result.json is nested too deeply"
    assert "nested too deeply" in el.ok("trial", "get", trial).stdout
    result = el.ok("job", "result", job, "--json").json()["profiles"][profile]
    assert result["score"] == 1.0 and result["structured"]["invalid"] == 2


def test_hostile_results_are_served_by_the_api(server: Server, ctx: Context, tmp_path: Path) -> None:
    dataset = push_tasks(ctx, tmp_path, "served", ["t1", "t2"])
    profile = make_profile(ctx, tmp_path, "team/served")
    job = run_job(
        ctx, dataset, [profile], 1, lambda _p, t, _a: 1e308 if t == "t1" else 0.5, structured=lambda *_: DEEP
    )
    with server.http() as http:
        result = http.get(f"/v1/jobs/{job}/result")
        assert result.status_code == 200 and result.json()["profiles"][profile]["score"] == 0.5
        trials = http.get(f"/v1/jobs/{job}/trials").json()
        detail = http.get(f"/v1/trials/{trials[0]['id']}")
        assert detail.status_code == 200 and detail.json()["structured"]["error"] is not None


def test_a_task_toml_nested_too_deeply_is_refused_at_push_in_one_line(el: El, tmp_path: Path) -> None:
    task = tmp_path / "deep-task"
    source = EXAMPLES / "tasks" / "hello-file"
    for path in source.rglob("*"):
        if path.is_file():
            target = task / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    with (task / "task.toml").open("a") as handle:
        handle.write("\n[extra]\nx = " + "[" * 50_000 + "]" * 50_000 + "\n")
    message = _one_line(el("dataset", "push", str(task), "--name", "deep"))
    assert "task.toml: nested more than 32 levels deep" in message
    assert el.ok("dataset", "list", "--json").json() == []


def test_a_jsonl_row_nested_too_deeply_is_refused_at_push_in_one_line(el: El, tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    for depth in (50_000, 100):
        nested = "[" * depth + "]" * depth
        rows.write_text(
            json.dumps({"prompt": "p", "answer": "a"})
            + "\n"
            + '{"prompt": "q", "answer": "b", "metadata": {"x": '
            + nested
            + "}}\n"
        )
        message = _one_line(el("dataset", "push", str(rows), "--name", "deep", "--scorer", "exact"))
        assert "nested" in message and str(tmp_path) not in message
    assert el.ok("dataset", "list", "--json").json() == []


def test_a_task_over_the_archive_limit_is_refused_at_push_naming_the_limit(el: El, tmp_path: Path) -> None:
    """Every trial unpacks its task within the archive limit (1 GiB): a bigger task would be accepted
    and then fail every trial, so the push refuses it. (The 1.1 GB file is sparse: nothing is written.)"""
    task = tmp_path / "huge-task"
    source = EXAMPLES / "tasks" / "hello-file"
    for path in source.rglob("*"):
        if path.is_file():
            target = task / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    with (task / "environment" / "blob.bin").open("wb") as handle:
        handle.truncate(1_100_000_000)
    message = _one_line(el("dataset", "push", str(task), "--name", "huge", timeout=600))
    assert "task huge-task holds 1,100,000" in message and "at most 1,073,741,824 bytes (1 GiB)" in message
    assert str(tmp_path) not in message
    assert el.ok("dataset", "list", "--json").json() == []
