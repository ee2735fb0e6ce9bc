"""Specification of `el job compare`: B - A task by task, with its uncertainty and what was left out.

The difference is the mean over tasks both runs scored of (B's task mean - A's task mean); its
standard error, interval and p-value are those of one paired t test (Miller 2024, "Adding Error
Bars to Evals", section on paired differences). Tasks only one side scored are excluded and listed;
jobs that did not measure the same thing (dataset revision, runner, no task in common) are refused
with the reason, lesser differences (attempts, task selection) compared with a warning.
"""

import math
import statistics
from pathlib import Path

import pytest

from envloop.errors import UserError
from envloop.services.compare import compare_runs
from envloop.services.context import Context
from tests.conftest import El
from tests.test_compare_support import Rewards, make_profile, push_tasks, run_job

TASKS = ["t1", "t2", "t3", "t4", "t5"]
BEFORE = {"t1": [1, 0], "t2": [0, 0], "t3": [1, 1], "t4": [0, 1], "t5": [0, 0]}
AFTER = {"t1": [1, 1], "t2": [1, 0], "t3": [1, 1], "t4": [1, 1], "t5": [0, 0]}
T_975_DF4 = 2.776445105


@pytest.fixture
def runs(ctx: Context, tmp_path: Path) -> tuple[Context, str, str, str]:
    dataset = push_tasks(ctx, tmp_path, "heldout", TASKS)
    base = make_profile(ctx, tmp_path, "team/base", {"AGENT_NAME": "nop", "MODEL_NAME": "m/base"})
    sft = make_profile(ctx, tmp_path, "team/sft", {"AGENT_NAME": "nop", "MODEL_NAME": "m/sft"})
    return ctx, dataset, base, sft


def _grid(table: dict[str, list[int]]) -> Rewards:
    return lambda _p, task, attempt: float(table[task][attempt - 1])


def test_two_jobs_compare_b_minus_a_over_the_tasks_both_scored(runs: tuple[Context, str, str, str]) -> None:
    ctx, dataset, base, sft = runs
    job_a = run_job(ctx, dataset, [base], 2, _grid(BEFORE))
    job_b = run_job(ctx, dataset, [sft], 2, _grid(AFTER))
    result = compare_runs(ctx, job_a, job_b)
    a = [sum(v) / 2 for v in BEFORE.values()]
    b = [sum(v) / 2 for v in AFTER.values()]
    differences = [y - x for x, y in zip(a, b, strict=True)]
    assert result.n_tasks == 5
    assert result.difference == pytest.approx(statistics.mean(differences))
    assert result.stderr == pytest.approx(statistics.stdev(differences) / math.sqrt(5), rel=1e-12)
    assert result.ci95 is not None
    half = T_975_DF4 * statistics.stdev(differences) / math.sqrt(5)
    assert result.ci95[0] == pytest.approx(statistics.mean(differences) - half, rel=1e-9)
    assert result.correlation == pytest.approx(statistics.correlation(a, b), rel=1e-12)
    assert result.p_value is not None and 0 < result.p_value < 1
    assert (result.only_a, result.only_b, result.excluded) == (0, 0, [])
    assert result.comparable and result.warnings == []
    assert (result.a.model, result.b.model) == ("m/base", "m/sft")
    assert result.a.coverage == "score 40%, 10/10 attempts scored, 5/5 members complete"
    assert [t.task for t in result.tasks] == TASKS


def test_tasks_only_one_side_scored_are_excluded_and_counted_never_zeroed(
    runs: tuple[Context, str, str, str],
) -> None:
    ctx, dataset, base, sft = runs
    job_a = run_job(ctx, dataset, [base], 2, lambda _p, t, _a: None if t == "t1" else 1.0)
    job_b = run_job(ctx, dataset, [sft], 2, lambda _p, t, _a: None if t in ("t2", "t3") else 0.0)
    result = compare_runs(ctx, job_a, job_b)
    assert (result.n_tasks, result.only_a, result.only_b) == (2, 2, 1)
    assert [(e.task, e.reason) for e in result.excluded] == [
        ("t2", "only A scored it"),
        ("t3", "only A scored it"),
        ("t1", "only B scored it"),
    ]
    assert result.difference == -1.0


def test_jobs_on_different_dataset_revisions_are_refused_naming_the_reason(
    runs: tuple[Context, str, str, str], tmp_path: Path
) -> None:
    ctx, dataset, base, sft = runs
    revised = push_tasks(ctx, tmp_path, "heldout", TASKS, variant="edited")
    job_a = run_job(ctx, dataset, [base], 2, _grid(BEFORE))
    job_b = run_job(ctx, revised, [sft], 1, lambda *_: 1.0)
    with pytest.raises(UserError) as refused:
        compare_runs(ctx, job_a, job_b)
    assert str(refused.value) == (
        f"cannot compare these jobs: they ran different dataset revisions ({dataset} vs {revised}), "
        "whose tasks differ"
    )


def test_jobs_sharing_no_task_are_refused_and_lesser_differences_are_warned(
    runs: tuple[Context, str, str, str],
) -> None:
    ctx, dataset, base, sft = runs
    job_a = run_job(ctx, dataset, [base], 2, _grid(BEFORE), tasks=["t1", "t2"])
    job_b = run_job(ctx, dataset, [sft], 1, lambda *_: 1.0, tasks=["t3"])
    with pytest.raises(UserError, match="cannot compare these jobs: they share no task"):
        compare_runs(ctx, job_a, job_b)
    job_c = run_job(ctx, dataset, [sft], 1, lambda *_: 1.0, tasks=["t2", "t3"])
    result = compare_runs(ctx, job_a, job_c)
    assert not result.comparable
    assert result.warnings == [
        "not comparable: attempt count differs: 2 (A) vs 1 (B)",
        "not comparable: task names differ: 1 only in A (t1), 1 only in B (t3)",
    ]
    assert (result.n_tasks, result.only_a, result.only_b) == (1, 1, 1)


def test_the_header_counts_tasks_that_improved_regressed_or_stayed(
    runs: tuple[Context, str, str, str],
) -> None:
    """B - A per task: t1 +0.5, t2 +0.5, t3 0, t4 +0.5, t5 0."""
    ctx, dataset, base, sft = runs
    job_a = run_job(ctx, dataset, [base], 2, _grid(BEFORE))
    job_b = run_job(ctx, dataset, [sft], 2, _grid(AFTER))
    result = compare_runs(ctx, job_a, job_b)
    assert (result.improved, result.regressed, result.unchanged) == (3, 0, 2)
    reverse = compare_runs(ctx, job_b, job_a)
    assert (reverse.improved, reverse.regressed, reverse.unchanged) == (0, 3, 2)
    assert result.unit == "points" and result.method.startswith("paired t test")


def test_two_profiles_of_one_job_compare_in_submission_order(runs: tuple[Context, str, str, str]) -> None:
    ctx, dataset, base, sft = runs
    tables = {base: BEFORE, sft: AFTER}
    job = run_job(ctx, dataset, [base, sft], 2, lambda p, t, a: float(tables[p][t][a - 1]))
    result = compare_runs(ctx, job)
    assert (result.a.profile, result.b.profile, result.a.job_id, result.b.job_id) == (base, sft, job, job)
    assert result.difference == pytest.approx(0.3)
    swapped = compare_runs(ctx, job, profile_a=sft, profile_b=base)
    assert swapped.difference == pytest.approx(-0.3)


def test_an_ambiguous_or_impossible_choice_of_sides_is_refused(
    runs: tuple[Context, str, str, str], tmp_path: Path
) -> None:
    ctx, dataset, base, sft = runs
    third = make_profile(ctx, tmp_path, "team/third")
    job = run_job(ctx, dataset, [base, sft, third], 1, lambda *_: 1.0)
    single = run_job(ctx, dataset, [base], 1, lambda *_: 1.0)
    with pytest.raises(UserError, match="name both profiles"):
        compare_runs(ctx, job)
    with pytest.raises(UserError, match="with itself"):
        compare_runs(ctx, job, profile_a=base, profile_b=base)
    with pytest.raises(UserError, match=r"ran 3 profiles .*name the one for A"):
        compare_runs(ctx, job, single)
    with pytest.raises(UserError, match="did not run profile team/third@1"):
        compare_runs(ctx, single, job, profile_a=third, profile_b=third)
    with pytest.raises(UserError, match="unknown job"):
        compare_runs(ctx, single, "job_missing")


def _document(scale: list[float], direction: str, value: float) -> dict[str, object]:
    return {"dimensions": {"acc": {"value": value, "scale": scale, "direction": direction}}}


@pytest.mark.parametrize(
    ("scale_b", "direction_b", "refusal"),
    [
        ([0, 1], "higher", None),
        ([1, 5], "higher", "acc: scale differs ([0, 1] higher is better vs [1, 5] higher is better)"),
        ([0, 1], "lower", "acc: direction differs"),
    ],
)
def test_dimensions_are_compared_only_when_both_runs_define_them_alike(
    runs: tuple[Context, str, str, str], scale_b: list[float], direction_b: str, refusal: str | None
) -> None:
    ctx, dataset, base, sft = runs
    values = {"t1": 0.1, "t2": 0.2, "t3": 0.3, "t4": 0.4, "t5": 1.0}
    job_a = run_job(
        ctx, dataset, [base], 1, lambda *_: 1.0, lambda _p, t, _a: _document([0, 1], "higher", values[t])
    )
    job_b = run_job(
        ctx,
        dataset,
        [sft],
        1,
        lambda *_: 1.0,
        lambda _p, t, _a: _document(scale_b, direction_b, values[t] ** 0.5),
    )
    (acc,) = compare_runs(ctx, job_a, job_b).dimensions
    if refusal is None:
        assert acc.refused is None and acc.n_tasks == 5
        assert acc.difference == pytest.approx(statistics.mean(v**0.5 - v for v in values.values()))
        assert acc.correlation is not None and acc.correlation > 0.9
    else:
        assert acc.difference is None and acc.ci95 is None
        assert acc.refused is not None and acc.refused.startswith(refusal)


def test_a_dimension_only_one_run_reports_is_refused(runs: tuple[Context, str, str, str]) -> None:
    ctx, dataset, base, sft = runs
    job_a = run_job(ctx, dataset, [base], 1, lambda *_: 1.0, lambda *_: _document([0, 1], "higher", 0.5))
    job_b = run_job(ctx, dataset, [sft], 1, lambda *_: 1.0)
    (acc,) = compare_runs(ctx, job_a, job_b).dimensions
    assert acc.refused == "acc: only A reports it"


def test_cli_compare_json_carries_the_contract_keys_and_text_shows_points(
    el: El, runs: tuple[Context, str, str, str]
) -> None:
    ctx, dataset, base, sft = runs
    job_a = run_job(ctx, dataset, [base], 2, _grid(BEFORE))
    job_b = run_job(ctx, dataset, [sft], 2, _grid(AFTER))
    data = el.ok("job", "compare", job_a, job_b, "--json").json()
    assert data["difference"] == pytest.approx(0.3)
    assert data["n_tasks"] == 5 and len(data["ci95"]) == 2
    assert {"stderr", "correlation", "only_a", "only_b", "excluded", "warnings", "a", "b"} <= data.keys()
    assert (data["unit"], data["improved"], data["regressed"], data["unchanged"]) == ("points", 3, 0, 2)
    text = el.ok("job", "compare", job_a, job_b).stdout
    assert "3 improved · 0 regressed · 2 unchanged" in text
    assert "B - A  +30.0 pts" in text and "on 5 tasks both scored" in text
    low, high = (f"{v * 100:+.1f}" for v in data["ci95"])
    assert f"95% CI {low} to {high} pts" in text and f"p = {data['p_value']:.3g}" in text
    assert "score 40%, 10/10 attempts scored, 5/5 members complete (95% CI" in text
    other = run_job(ctx, dataset, [sft], 1, lambda *_: 1.0)
    warned = el.ok("job", "compare", job_a, other, "--json")
    assert "not comparable: attempt count differs: 2 (A) vs 1 (B)" in warned.stderr
    assert warned.json()["comparable"] is False
    refused = el("job", "compare", job_a, "job_nope")
    assert refused.code == 2 and refused.stderr.count("\n") == 1


NEAR_ONE_A = {"t1": [1, 1], "t2": [1, 1], "t3": [1, 0]}  # B fails every attempt: B - A near -1


def test_a_paired_interval_of_two_binary_runs_on_three_tasks_stays_within_minus_one_and_one(
    el: El, ctx: Context, tmp_path: Path
) -> None:
    """Means -1, -1, -0.5: the t interval reaches about -1.55; a difference of two rates cannot."""
    dataset = push_tasks(ctx, tmp_path, "three", ["t1", "t2", "t3"])
    base = make_profile(ctx, tmp_path, "team/base")
    sft = make_profile(ctx, tmp_path, "team/sft")
    job_a = run_job(ctx, dataset, [base], 2, _grid(NEAR_ONE_A))
    job_b = run_job(ctx, dataset, [sft], 2, lambda *_: 0.0)
    result = compare_runs(ctx, job_a, job_b)
    assert result.difference == pytest.approx(-5 / 6)
    assert result.ci95 is not None
    low, high = result.ci95
    assert -1.0 <= low < result.difference < high <= 1.0
    assert low == -1.0 and result.ci95_clamped
    reversed_ = compare_runs(ctx, job_b, job_a)
    assert reversed_.ci95 is not None and reversed_.ci95[1] == 1.0 and reversed_.ci95_clamped
    text = el.ok("job", "compare", job_a, job_b).stdout
    assert "95% CI -100.0 to " in text and " pts, cut at the possible range" in text
    assert el.ok("job", "compare", job_a, job_b, "--json").json()["ci95_clamped"] is True


def test_a_binary_run_that_moved_every_task_by_one_gets_no_interval_and_says_why(
    el: El, ctx: Context, tmp_path: Path
) -> None:
    """All three differences are -1: no spread, so the t test cannot measure the uncertainty; three
    tasks are not a certainty, so neither a point interval nor a p-value is given."""
    dataset = push_tasks(ctx, tmp_path, "edge", ["t1", "t2", "t3"])
    base = make_profile(ctx, tmp_path, "team/base")
    sft = make_profile(ctx, tmp_path, "team/sft")
    job_a = run_job(ctx, dataset, [base], 1, lambda *_: 1.0)
    job_b = run_job(ctx, dataset, [sft], 1, lambda *_: 0.0)
    result = compare_runs(ctx, job_a, job_b)
    assert result.difference == -1.0 and result.ci95 is None and result.p_value is None
    assert result.no_interval is not None and "no spread" in result.no_interval
    text = el.ok("job", "compare", job_a, job_b).stdout
    assert "B - A  -100.0 pts" in text and "no interval: every task moved by the same amount" in text


def test_rewards_outside_zero_one_are_never_clamped(ctx: Context, tmp_path: Path) -> None:
    dataset = push_tasks(ctx, tmp_path, "raw", ["t1", "t2", "t3"])
    base = make_profile(ctx, tmp_path, "team/base")
    sft = make_profile(ctx, tmp_path, "team/sft")
    job_a = run_job(ctx, dataset, [base], 1, lambda _p, t, _a: {"t1": 5.0, "t2": 9.0, "t3": 1.0}[t])
    job_b = run_job(ctx, dataset, [sft], 1, lambda *_: 0.0)
    result = compare_runs(ctx, job_a, job_b)
    assert result.ci95 is not None and result.ci95[0] < -10 and not result.ci95_clamped
