"""Specification of the project leaderboard (SPEC section 4).

One board per dataset revision; runs with another runner, task set or attempt count are refused
with the differing field named. A row is a (job, profile) snapshot saved once; ranks are by the
score with every missing attempt counted as 0 (missing never pays), ties shared and visible, and
rows whose bounds overlap marked as not separated.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from envloop.core.leaderboard import RunKey, key_differences, model_label, rank_standings
from envloop.core.metrics import score_bounds
from envloop.errors import NotFoundError, UserError
from envloop.services import leaderboard, trials
from envloop.services.context import Context
from envloop.store.tables import LeaderboardRow
from tests.conftest import El
from tests.test_compare_support import make_profile, push_tasks, run_job

TASKS = ["a", "b", "c", "d"]
KEY = RunKey(
    dataset="bench@1", runner="envloop/shell@1", attempts=2, tasks=(("a", "sha256:1"), ("b", "sha256:2"))
)


def test_the_compatibility_key_names_every_field_that_differs() -> None:
    assert key_differences(KEY, KEY) == []
    other = RunKey(
        dataset="bench@2", runner="envloop/chat@1", attempts=3, tasks=(("a", "sha256:9"), ("z", "sha256:3"))
    )
    assert key_differences(KEY, other) == [
        "dataset revision differs: bench@1 (board) vs bench@2 (this run)",
        "runner reference differs: envloop/shell@1 (board) vs envloop/chat@1 (this run)",
        "attempt count differs: 2 (board) vs 3 (this run)",
        "task names differ: 1 only in board (b), 1 only in this run (z)",
        "task digests differ: 1 tasks have other content (a)",
    ]
    assert KEY.digest() == RunKey.model_validate(KEY.model_dump()).digest() != other.digest()


def test_the_model_column_is_model_name_or_else_the_profile() -> None:
    assert model_label({"MODEL_NAME": "acme/m-7b/sft"}, "team/sft@1") == "acme/m-7b/sft"
    assert model_label({"AGENT_NAME": "oracle"}, "demo/oracle@1") == "demo/oracle@1"
    assert model_label({"MODEL_NAME": "  "}, "p@1") == "p@1"


@dataclass
class Row:
    lower_bound: float
    upper_bound: float
    missing: int
    added_at: datetime
    job_id: str
    profile: str


def test_rows_rank_by_the_lower_bound_ties_share_a_rank_and_overlaps_are_named() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [
        Row(0.5, 0.5, 0, t0, "job_a", "p@1"),  # 50% of every attempt
        Row(0.0, 1.0, 10, t0, "job_b", "p@1"),  # nothing scored: anywhere from 0 to 100%
        Row(0.9, 0.9, 0, t0, "job_c", "p@1"),
        Row(0.5, 1.0, 2, t0, "job_d", "p@1"),  # 100% of what was scored, half missing
        Row(0.5, 0.5, 0, t0 - timedelta(hours=1), "job_e", "p@1"),
        Row(0.1, 0.1, 0, t0, "job_f", "p@1"),
    ]
    placed = [(rows[p.row].job_id, p.rank, p.tied, p.not_separated_from) for p in rank_standings(rows)]
    assert placed == [
        ("job_c", 1, False, (4, 6)),  # 90% lies within d's 50-100% and b's 0-100%
        ("job_e", 2, True, (2, 4, 6)),  # same lower bound and missing as a: tied, earlier addition first
        ("job_a", 2, True, (2, 4, 6)),
        ("job_d", 4, False, (1, 2, 6)),  # the same lower bound with more missing: below them
        ("job_f", 5, False, (6,)),
        ("job_b", 6, False, (1, 2, 4, 5)),
    ]
    shuffled = list(reversed(rows))
    assert [shuffled[p.row].job_id for p in rank_standings(shuffled)] == [job for job, *_ in placed]


def test_a_missing_attempt_bounds_the_score_between_zero_and_the_best_reward() -> None:
    assert score_bounds(2.0, 4, 2, 1.0) == (0.5, 1.0)  # 1, 1, missing, missing
    assert score_bounds(1.0, 2, 0, 1.0) == (0.5, 0.5)  # full coverage: a single point
    assert score_bounds(7.0, 4, 1, 4.0) == (1.75, 2.75)  # a missing attempt could have scored 4
    assert score_bounds(0.0, 3, 3, 1.0) == (0.0, 1.0)


@pytest.fixture
def board(ctx: Context, tmp_path: Path) -> tuple[Context, str, dict[str, str]]:
    dataset = push_tasks(ctx, tmp_path, "bench", TASKS)
    refs = {
        "base": make_profile(ctx, tmp_path, "team/base", {"AGENT_NAME": "nop", "MODEL_NAME": "m/base"}),
        "sft": make_profile(ctx, tmp_path, "team/sft", {"AGENT_NAME": "nop", "MODEL_NAME": "m/sft"}),
        "plain": make_profile(ctx, tmp_path, "team/plain"),
    }
    return ctx, dataset, refs


def _rows(ctx: Context) -> int:
    with ctx.store.read() as session:
        return session.scalar(select(func.count()).select_from(LeaderboardRow)) or 0


def test_a_row_holds_rank_model_score_interval_and_coverage(
    board: tuple[Context, str, dict[str, str]],
) -> None:
    ctx, dataset, refs = board
    job = run_job(ctx, dataset, [refs["base"], refs["plain"]], 2, lambda p, t, a: 1.0 if t in "ab" else 0.0)
    rows = leaderboard.add_to_leaderboard(ctx, job)
    assert [(r.profile, r.model) for r in rows] == [(refs["base"], "m/base"), (refs["plain"], refs["plain"])]
    row = rows[0]
    assert (row.rank, row.tied, row.score, row.scored, row.missing, row.total) == (1, True, 0.5, 8, 0, 8)
    assert row.ci95 is not None and row.ci95[0] < 0.5 < row.ci95[1] and row.stderr is not None
    assert row.coverage == "score 50%, 8/8 attempts scored, 4/4 members complete"
    assert (row.dataset, row.runner, row.attempts, row.job_status) == (
        dataset,
        "envloop/shell@1",
        2,
        "completed",
    )


def test_adding_again_returns_the_saved_snapshot_even_after_an_invalidation(
    board: tuple[Context, str, dict[str, str]],
) -> None:
    ctx, dataset, refs = board
    job = run_job(ctx, dataset, [refs["base"]], 2, lambda *_: 1.0)
    (first,) = leaderboard.add_to_leaderboard(ctx, job)
    trials.invalidate_trial(ctx, trials.list_trials(ctx, job)[0].id, "flaky host")
    (again,) = leaderboard.add_to_leaderboard(ctx, job, refs["base"])
    assert again == first
    assert (again.scored, again.missing) == (8, 0)
    assert _rows(ctx) == 1


def test_a_job_that_does_not_fit_the_board_is_refused_naming_the_field_and_nothing_is_added(
    board: tuple[Context, str, dict[str, str]],
) -> None:
    ctx, dataset, refs = board
    leaderboard.add_to_leaderboard(ctx, run_job(ctx, dataset, [refs["base"]], 2, lambda *_: 1.0))
    more_attempts = run_job(ctx, dataset, [refs["sft"]], 3, lambda *_: 1.0)
    with pytest.raises(UserError, match=r"attempt count differs: 2 \(board\) vs 3 \(this run\)"):
        leaderboard.add_to_leaderboard(ctx, more_attempts)
    fewer_tasks = run_job(ctx, dataset, [refs["sft"]], 2, lambda *_: 1.0, tasks=["a", "b"])
    with pytest.raises(UserError, match=r"task names differ: 2 only in board \(c, d\)"):
        leaderboard.add_to_leaderboard(ctx, fewer_tasks)
    both = run_job(ctx, dataset, [refs["sft"]], 1, lambda *_: 1.0, tasks=["a"])
    with pytest.raises(UserError, match=r"attempt count differs: .*; task names differ: 3 only in board"):
        leaderboard.add_to_leaderboard(ctx, both)
    assert _rows(ctx) == 1


def test_another_dataset_revision_gets_its_own_board(
    board: tuple[Context, str, dict[str, str]], tmp_path: Path
) -> None:
    ctx, dataset, refs = board
    changed = push_tasks(ctx, tmp_path, "bench", TASKS, variant="v2")
    assert changed != dataset
    leaderboard.add_to_leaderboard(ctx, run_job(ctx, dataset, [refs["base"]], 2, lambda *_: 0.0))
    leaderboard.add_to_leaderboard(ctx, run_job(ctx, changed, [refs["sft"]], 1, lambda *_: 1.0))
    assert [(r.dataset, r.rank) for r in leaderboard.show_leaderboard(ctx)] == [(dataset, 1), (changed, 1)]
    assert [r.dataset for r in leaderboard.show_leaderboard(ctx, changed)] == [changed]


def test_unfinished_jobs_unknown_profiles_and_unknown_boards_are_refused(
    board: tuple[Context, str, dict[str, str]],
) -> None:
    ctx, dataset, refs = board
    running = run_job(ctx, dataset, [refs["base"]], 1, lambda _p, t, _a: "running" if t == "a" else 1.0)
    with pytest.raises(UserError, match="is running: add it when it has finished"):
        leaderboard.add_to_leaderboard(ctx, running)
    done = run_job(ctx, dataset, [refs["base"]], 1, lambda *_: 1.0)
    with pytest.raises(UserError, match=r"did not run profile team/sft@1 \(it ran team/base@1\)"):
        leaderboard.add_to_leaderboard(ctx, done, refs["sft"])
    with pytest.raises(NotFoundError):
        leaderboard.show_leaderboard(ctx, "nowhere@1")
    assert _rows(ctx) == 0
    assert leaderboard.show_leaderboard(ctx, dataset) == []


def test_a_failed_job_with_partial_scores_appears_with_its_missing_count(
    board: tuple[Context, str, dict[str, str]],
) -> None:
    ctx, dataset, refs = board
    job = run_job(ctx, dataset, [refs["base"]], 2, lambda _p, t, a: None if t == "d" else 1.0)
    (row,) = leaderboard.add_to_leaderboard(ctx, job)
    assert (row.scored, row.missing, row.invalid, row.complete_members) == (6, 2, 2, 3)


def test_cli_add_and_show_print_ranked_rows_and_refusals_exit_2(
    el: El, board: tuple[Context, str, dict[str, str]]
) -> None:
    ctx, dataset, refs = board
    better = run_job(ctx, dataset, [refs["sft"]], 2, lambda *_: 1.0)
    worse = run_job(ctx, dataset, [refs["base"]], 2, lambda _p, t, _a: 1.0 if t == "a" else 0.0)
    unscored = run_job(ctx, dataset, [refs["plain"]], 2, lambda *_: None)
    added = el.ok("leaderboard", "add", worse, "--json").json()
    assert [(r["job_id"], r["profile"], r["rank"]) for r in added] == [(worse, refs["base"], 1)]
    el.ok("leaderboard", "add", better, "--profile", refs["sft"])
    el.ok("leaderboard", "add", unscored)
    rows = el.ok("leaderboard", "show", "--dataset", dataset, "--json").json()
    assert [
        (r["rank"], r["job_id"], r["profile"], r["score"], r["scored"], r["missing"], r["lower_bound"])
        for r in rows
    ] == [
        (1, better, refs["sft"], 1.0, 8, 0, 1.0),
        (2, worse, refs["base"], 0.25, 8, 0, 0.25),
        (3, unscored, refs["plain"], None, 0, 8, 0.0),
    ]
    assert [(r["upper_bound"], r["not_separated_from"], r["separated"]) for r in rows] == [
        (1.0, [3], False),
        (0.25, [3], False),
        (1.0, [1, 2], False),  # nothing measured: it could be anywhere
    ]
    assert all(len(r["ci95"]) == 2 for r in rows[:2])
    text = el.ok("leaderboard", "show").stdout
    assert f"1  m/sft ({refs['sft']})  {better}  not separated from #3" in text
    assert "lower bound 25% with missing as 0 (up to 25% with missing as best), score 25% (95% CI" in text
    assert "8/8 attempts scored, 0 missing" in text
    assert f"3  {refs['plain']}  {unscored}  not separated from #1, #2" in text
    misfit = run_job(ctx, dataset, [refs["base"]], 1, lambda *_: 1.0)
    refused = el("leaderboard", "add", misfit, "--json")
    assert refused.code == 2 and refused.stdout == ""
    assert refused.stderr.strip().splitlines() == [
        f"el: error: job {misfit} does not fit the {dataset} leaderboard: "
        "attempt count differs: 2 (board) vs 1 (this run)"
    ]
