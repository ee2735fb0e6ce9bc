"""`el dataset check`: one verdict per task from a job of the oracle and the nop agent, through the
CLI. Four tasks, each healthy or broken in one way, must each be named for what is wrong with them."""

import json
import re
from pathlib import Path

import pytest

from envloop.core.dataset_health import CheckedRun, task_health
from envloop.environments.local.bwrap import bwrap_executable
from tests.api_server import Server
from tests.conftest import El, make_task

# A verifier that flips a coin: judging one final state ten times, it disagrees with itself in a
# run but once in 512 (and in each of three runs once in 134 million).
FLAKY = (
    'logs="${ENVLOOP_LOGS_DIR:-/logs}"\n'
    'if [ $((RANDOM % 2)) -eq 0 ]; then echo 1 > "$logs/verifier/reward.txt"\n'
    'else echo 0 > "$logs/verifier/reward.txt"; fi\n'
)
# An oracle whose final state differs from run to run: the second of three fails. Its verifier is
# steady on each state, so this is the oracle's failure, not the verifier's.
ODD_ORACLE = 'if [ "$ENVLOOP_ATTEMPT" != 2 ]; then touch done; fi'
ALWAYS_PASSES = 'echo 1 > "${ENVLOOP_LOGS_DIR:-/logs}/verifier/reward.txt"\n'


def _run(reward: float | None, error: str | None = None, flaky: str | None = None) -> CheckedRun:
    return CheckedRun(attempt=2, reward=reward, error=error, flaky=flaky)


def test_each_problem_is_named_and_only_a_task_without_one_is_healthy() -> None:
    healthy = task_health("ok", [_run(1.0)] * 3, [_run(0.0)] * 3)
    assert healthy.healthy and healthy.problems == []
    failing = task_health("bad", [_run(0.0)] * 3, [_run(0.0)] * 3)
    assert failing.problems == ["oracle fails: reward 0 in all 3 runs"]
    said = "one final state scored 1, 0, 1 in 3 verifier runs"
    flaky = task_health("flaky", [_run(1.0), _run(1.0, flaky=said)], [_run(1.0)])
    # Nothing else is judged by a flaky verifier: the nop's 1 says nothing of the task.
    assert flaky.problems == [f"verifier flaky: {said} (the oracle's attempt 2)"]
    uneven = task_health("uneven", [_run(1.0), _run(0.0), _run(1.0)], [_run(0.0)])
    assert uneven.problems == ["oracle fails in 1 of 3 runs: rewards 1, 0, 1"]
    nop = task_health("nop", [_run(1.0)], [_run(1.0), _run(0.0)])
    assert nop.problems == ["nop passes: doing nothing scored 1 in 1 of 2 runs"]
    broken = task_health("broken", [_run(None, "environment did not start")], [_run(0.0)])
    assert not broken.healthy
    assert broken.problems == ["no verdict in 1 of 2 runs: environment did not start"]
    left_out = task_health("gpu", [], [], unsupported="not run: needs GPUs")
    assert not left_out.healthy and left_out.problems == ["not run: needs GPUs"]
    waiting = task_health("wait", [CheckedRun(attempt=0, reward=None, pending=True)], [])
    assert not waiting.healthy and waiting.pending and waiting.problems == []


@pytest.mark.slow
@pytest.mark.skipif(bwrap_executable()[0] is None, reason="no bwrap")
def test_a_check_of_four_tasks_names_what_is_wrong_with_each_and_exits_1(el: El, tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    make_task(root, "healthy", solve="touch done")
    make_task(root, "oracle-fails", solve="true")
    make_task(root, "nop-passes", solve="touch done", test=ALWAYS_PASSES)
    make_task(root, "verifier-flaky", solve="touch done", test=FLAKY)
    make_task(root, "oracle-uneven", solve=ODD_ORACLE)
    make_task(root, "silent", solve="touch done", test="true\n")  # its verifier never writes a reward
    needs_docker = make_task(root, "needs-docker", solve="touch done")
    (needs_docker / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nRUN true\n")
    el.ok("dataset", "push", str(root), "--name", "bench")

    checked = el(
        *("dataset", "check", "bench@1", "--attempts", "3", "--verifier-runs", "10"),
        *("--environment", "local", "--json"),
        timeout=300,
    )
    assert checked.code == 1, checked.stderr
    health = json.loads(checked.stdout)
    assert health["healthy"] is False and health["finished"] is True
    verdicts = {task["task"]: task for task in health["tasks"]}
    assert verdicts["healthy"]["healthy"] is True and verdicts["healthy"]["problems"] == []
    assert verdicts["healthy"]["oracle"] == [1.0, 1.0, 1.0]
    assert verdicts["oracle-fails"]["problems"] == ["oracle fails: reward 0 in all 3 runs"]
    assert verdicts["nop-passes"]["problems"] == ["nop passes: doing nothing scored 1 in 3 of 3 runs"]
    assert health["verifier_runs"] == 10
    [flaky] = verdicts["verifier-flaky"]["problems"]
    assert re.fullmatch(
        r"verifier flaky: one final state scored ([01], ){9}[01] in 10 verifier runs "
        r"\(the oracle's attempt [123]\)",
        flaky,
    ), flaky
    assert verdicts["oracle-uneven"]["problems"] == ["oracle fails in 1 of 3 runs: rewards 1, 0, 1"]
    assert verdicts["silent"]["problems"] == ["no verdict in 6 of 6 runs: no reward written"]
    # A feature the local sandbox cannot honour (a Dockerfile's RUN step) is named, not run.
    assert verdicts["needs-docker"]["problems"] == [
        "not run: needs Dockerfile instructions only a container runs, which --environment local cannot give"
    ]
    assert verdicts["needs-docker"]["oracle"] == []
    assert [t for t, v in verdicts.items() if v["healthy"]] == ["healthy"]
    assert all(v["verifier_sec"] is not None for v in verdicts.values() if v["oracle"])

    # The check is an ordinary job, kept and found by its tag; the revision shows its latest check.
    jobs = json.loads(el.ok("job", "list", "--tag", "health-check=bench@1", "--json").stdout)
    assert [job["id"] for job in jobs] == [health["job_id"]]
    # Each later verifier run of an oracle trial is kept apart; the trial's own logs are the first's.
    oracle_trials = json.loads(el.ok("trial", "list", "--job", health["job_id"], "--json").stdout)
    healthy_oracle = next(t for t in oracle_trials if t["task"] == "healthy" and "oracle" in t["profile"])
    assert sum(1 for p in healthy_oracle["phases"] if p["name"] == "verifier") == 10
    assert healthy_oracle["flags"] == []
    listed = json.loads(el.ok("trial", "artifacts", healthy_oracle["id"], "--json").stdout)
    kept = {item["path"] for item in listed}
    assert {
        "verifier/reward.txt",
        "verifier-runs/2/verifier/reward.txt",
        "verifier-runs/10/verifier/reward.txt",
    } <= kept
    shown = el.ok("dataset", "show", "bench@1").stdout
    assert "health check" in shown and "1 of 7 tasks healthy" in shown
    assert "verifier flaky" in shown


def test_a_revision_never_checked_says_so(el: El, tmp_path: Path) -> None:
    make_task(tmp_path / "tasks", "one", solve="touch done")
    el.ok("dataset", "push", str(tmp_path / "tasks"), "--name", "fresh")
    shown = el.ok("dataset", "show", "fresh@1").stdout
    assert "never checked" in shown
    missing = el("dataset", "check", "nope@1")
    assert missing.code == 2 and missing.stderr.count("\n") == 1 and "Traceback" not in missing.stderr


def test_a_dataset_none_of_whose_tasks_can_run_here_is_refused_in_one_line(el: El, tmp_path: Path) -> None:
    task = make_task(tmp_path / "tasks", "needs-docker", solve="touch done")
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nRUN true\n")
    el.ok("dataset", "push", str(tmp_path / "tasks"), "--name", "docker-only")
    refused = el("dataset", "check", "docker-only@1", "--environment", "local")
    assert refused.code == 2, refused.stderr
    assert refused.stderr.startswith(
        "el: error: no task of docker-only@1 can be checked in the local environment"
    )
    assert refused.stderr.count("\n") == 1
    assert "never checked" in el.ok("dataset", "show", "docker-only@1").stdout


@pytest.mark.slow
@pytest.mark.skipif(bwrap_executable()[0] is None, reason="no bwrap")
def test_a_check_over_http_gives_the_same_verdicts_and_the_revision_shows_it(
    busy_server: Server, tmp_path: Path
) -> None:
    root = tmp_path / "tasks"
    make_task(root, "healthy", solve="touch done")
    make_task(root, "oracle-fails", solve="true")
    remote = {
        "ENVLOOP_URL": busy_server.url,
        "ENVLOOP_API_KEY": busy_server.key,
        "ENVLOOP_HOME": str(tmp_path / "elsewhere"),
    }
    el = busy_server.el
    assert el("dataset", "push", str(root), "--name", "remote", env=remote).code == 0
    checked = el("dataset", "check", "remote@1", "--environment", "local", "--json", env=remote, timeout=300)
    assert checked.code == 1, checked.stderr
    health = json.loads(checked.stdout)
    assert {t["task"]: t["problems"] for t in health["tasks"]} == {
        "healthy": [],
        "oracle-fails": ["oracle fails: reward 0 in all 3 runs"],
    }
    shown = el("dataset", "show", "remote@1", env=remote)
    assert shown.code == 0 and shown.stdout == el.ok("dataset", "show", "remote@1").stdout
    assert "1 of 2 tasks healthy" in shown.stdout
    latest = busy_server.http().get("/v1/dataset-checks/latest/remote@1").json()
    assert latest["job_id"] == health["job_id"] and latest["healthy"] is False
    not_a_check = busy_server.http().get("/v1/dataset-checks/job_nope")
    assert not_a_check.status_code == 404
    # The console's page of the check job shows the verdicts, task text escaped as everywhere.
    page = busy_server.http().get(f"/jobs/{health['job_id']}").text
    assert "Dataset health" in page and "1 of 2 tasks of remote@1 healthy" in page
    assert "oracle fails: reward 0 in all 3 runs" in page
    # The revision's own page shows the latest check's verdict beside each of its tasks.
    revision = busy_server.http().get("/datasets/remote@1").text
    assert "1 of 2 tasks of remote@1 healthy" in revision and f'href="/jobs/{health["job_id"]}"' in revision
    row = revision.split('<tr data-task="oracle-fails">')[1].split("</tr>")[0]
    assert "oracle fails: reward 0 in all 3 runs" in row and "0 0 0" in row
    el("dataset", "push", str(root / "healthy"), "--name", "unchecked", env=remote)
    unchecked = busy_server.http().get("/datasets/unchecked@latest")
    assert unchecked.status_code == 200 and "Never checked" in unchecked.text
    assert busy_server.http().get("/datasets/nope@1").status_code == 404
