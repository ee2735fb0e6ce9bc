"""Missing never pays: an agent that solves one task and sabotages the verifier of the other (its
answer becomes a FIFO, the verifier hangs, no reward) ranks below an honest agent with 50% over all
attempts, and the job's failure summary charges the hang to the agent, since the same verifier
scored the honest agent's attempts at that task."""

from pathlib import Path

import pytest
from sqlalchemy import select

from envloop.core.trial import TrialError, TrialOutcome
from envloop.services import datasets, job_submission, leaderboard
from envloop.services.context import Context
from envloop.services.failures import failure_summary
from envloop.store import queue
from envloop.store.tables import LeaderboardRow
from envloop.wire.jobs import JobRequest
from tests.api_server import Server
from tests.conftest import make_task, publish_profile, run_job_in_process
from tests.test_compare_support import make_profile, push_tasks, run_job

VERIFIER = (
    'app="${ENVLOOP_APP_DIR:-/app}"; logs="${ENVLOOP_LOGS_DIR:-/logs}"\n'
    'if [ "$(cat "$app/answer")" = 42 ]; then echo 1 > "$logs/verifier/reward.txt"; '
    'else echo 0 > "$logs/verifier/reward.txt"; fi\n'
)
HONEST = 'if [ "$ENVLOOP_TASK" = alpha ]; then echo 42 > answer; else echo 41 > answer; fi'
SABOTEUR = 'if [ "$ENVLOOP_TASK" = alpha ]; then echo 42 > answer; else mkfifo answer; fi'


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_an_agent_that_makes_its_verifier_hang_ranks_below_an_honest_agent_with_half_right(
    server: Server, ctx: Context, tmp_path: Path
) -> None:
    el = server.el
    for name in ("alpha", "beta"):
        make_task(tmp_path / "tasks", name, test=VERIFIER)
    dataset = datasets.push_dataset(ctx, tmp_path / "tasks", "fifo").ref
    agents = [
        publish_profile(
            ctx,
            tmp_path / f"{name}.json",
            f"team/{name}",
            {"AGENT_NAME": "command", "AGENT_COMMAND": command},
        )
        for name, command in (("honest", HONEST), ("saboteur", SABOTEUR))
    ]
    job_id = run_job_in_process(
        ctx, JobRequest(dataset=dataset, profiles=agents, attempts=2, verifier_timeout_sec=3)
    )

    result = el.ok("job", "result", job_id, "--json").json()
    saboteur = result["profiles"]["team/saboteur@1"]
    assert (saboteur["score"], saboteur["score_counts"]["missing"]) == (1.0, 2)  # 100% of what was scored
    [hang] = result["diagnosis"]["failures"]
    assert (hang["error_type"], hang["cause"], hang["count"]) == ("verifier_timeout", "agent", 2)
    assert "2 of them the agent's own doing" in el.ok("job", "result", job_id).stdout

    rows = el.ok("leaderboard", "add", job_id, "--json").json()
    placed = [(r["rank"], r["profile"], r["score"], r["lower_bound"], r["upper_bound"]) for r in rows]
    assert placed == [
        (1, "team/honest@1", 0.5, 0.5, 0.5),
        (2, "team/saboteur@1", 1.0, 0.5, 1.0),
    ]
    assert [r["not_separated_from"] for r in rows] == [[2], [1]]  # the missing two could decide it
    assert el.ok("leaderboard", "show", "--json").json() == rows
    with server.http() as http:
        page = http.get("/leaderboard").text
    assert page.index("team/honest@1") < page.index("team/saboteur@1")
    assert "≈ #2" in page and "≈ #1" in page


def test_a_verifier_no_attempt_ever_got_a_reward_from_is_charged_to_the_verifier(
    ctx: Context, tmp_path: Path
) -> None:
    dataset = push_tasks(ctx, tmp_path, "broken", ["a", "b"])
    agent = make_profile(ctx, tmp_path, "team/agent")
    job = run_job(ctx, dataset, [agent], 1, lambda _p, task, _a: None if task == "a" else 1.0)
    [group] = failure_summary(ctx, job)
    assert (group.kind, group.cause) == ("no_reward", "verifier")  # task a: never shown to work
    oracle = make_profile(ctx, tmp_path, "team/oracle", {"AGENT_NAME": "oracle"})
    run_job(ctx, dataset, [oracle], 1, lambda *_: 1.0)
    [group] = failure_summary(ctx, job)
    assert group.cause == "agent"  # the oracle's run shows the verifier of task a works


def test_rows_saved_before_bounds_existed_get_them_from_their_counts(ctx: Context, tmp_path: Path) -> None:
    dataset = push_tasks(ctx, tmp_path, "old", ["a", "b"])
    agent = make_profile(ctx, tmp_path, "team/agent")
    job = run_job(ctx, dataset, [agent], 2, lambda _p, task, _a: 1.0 if task == "a" else None)
    leaderboard.add_to_leaderboard(ctx, job)
    with ctx.store.write() as session:
        row = session.scalars(select(LeaderboardRow)).one()
        newer = ("lower_bound", "upper_bound", "flagged", "flags")
        row.snapshot = {k: v for k, v in row.snapshot.items() if k not in newer}
    [shown] = leaderboard.show_leaderboard(ctx)
    assert (shown.score, shown.lower_bound, shown.upper_bound, shown.flagged) == (1.0, 0.5, 1.0, 0)


def test_each_failure_is_charged_to_whoever_caused_it(ctx: Context, tmp_path: Path) -> None:
    dataset = push_tasks(ctx, tmp_path, "causes", ["t"])
    profile = make_profile(ctx, tmp_path, "team/agent")
    outcomes = {
        1: TrialOutcome(status="completed", reward=1.0),  # shows the verifier of t works
        2: failed("resource_exhausted", "agent phase: out of memory (the kernel killed 1 process)"),
        3: failed("verifier_timeout", "the verifier exceeded its 3 s timeout"),
        4: failed("model_error", "every model call failed (2 of 2 model calls failed)"),
        5: failed("environment_error", "environment setup failed: no bwrap"),
        6: failed("infrastructure_error", "the worker was lost"),
        7: TrialOutcome(status="cancelled"),
    }
    job = job_submission.submit_job(
        ctx, job_submission.JobRequest(dataset=dataset, profiles=[profile], attempts=7)
    ).job
    for claimed in queue.claim(ctx.store, "test-worker", 10, 3600):
        assert queue.finish(ctx.store, claimed, outcomes[claimed.attempt])
    causes = {group.error_type or group.kind: group.cause for group in failure_summary(ctx, job.id)}
    assert causes == {
        "resource_exhausted": "agent",
        "verifier_timeout": "agent",
        "model_error": "model",
        "environment_error": "environment",
        "infrastructure_error": "infrastructure",
        "cancelled": "user",
    }


def failed(error_type: str, message: str) -> TrialOutcome:
    return TrialOutcome(status="failed", error=TrialError(type=error_type, message=message))  # type: ignore[arg-type]
