"""Specification of `el plan`: tasks and attempts needed to detect an effect with a given power.

Model (core.planning): per-task difference variance V(k) = 2(1 - r)·σ²_b + 2·σ²_w/k from the
baseline's one-way random-effects variance components; a two-sided paired t test detects δ with
power P when n ≥ (t(1 - alpha/2, n-1) + t(P, n-1))²·V/δ² (the power analysis of Miller 2024,
"Adding Error Bars to Evals"; with normal quantiles this is the textbook (z + z)²σ²/δ²).
"""

import math
import random
from fractions import Fraction
from pathlib import Path
from statistics import NormalDist

import pytest

from envloop.core.planning import (
    VarianceComponents,
    attempts_needed,
    detectable_effect,
    difference_variance,
    tasks_needed,
    variance_components,
)
from envloop.core.stats import t_quantile
from envloop.errors import NotFoundError, UserError
from envloop.services.context import Context
from envloop.services.planning import plan_comparison
from tests.conftest import El
from tests.test_compare_support import make_profile, push_tasks, run_job


def test_variance_components_follow_the_one_way_anova_moments() -> None:
    """Task means 2/3, 0, 1, 1/3: their variance 5/27 less the noise σ²_w/3 = 1/18 leaves 7/54."""
    groups = [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0]]
    components = variance_components(groups)
    assert components.within == pytest.approx(float(Fraction(1, 6)), rel=1e-12)
    assert components.between == pytest.approx(float(Fraction(7, 54)), rel=1e-12)
    assert (components.tasks, components.attempts) == (4, 3.0)
    assert components.total == pytest.approx(float(Fraction(3, 11)), rel=1e-12)  # 12 values, 6 ones


def test_one_attempt_per_task_leaves_the_split_unknown_and_plans_for_the_worse_one() -> None:
    components = variance_components([[1.0], [0.0], [1.0], [0.0]])
    assert components.within is None
    assert components.between == pytest.approx(1 / 3)
    assert difference_variance(components, 1, 0.5) == pytest.approx(2 / 3)  # noise: pairing cannot help
    assert difference_variance(components, 10, 0.5) == pytest.approx(1 / 3)  # difficulty: attempts cannot
    with pytest.raises(ValueError):
        variance_components([[1.0, 0.0]])


def test_between_task_variance_never_goes_negative() -> None:
    components = variance_components([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    assert components.between == 0.0 and components.within == pytest.approx(0.5)


def test_pairing_and_attempts_shrink_the_difference_variance_as_the_model_says() -> None:
    components = VarianceComponents(tasks=10, attempts=2, between=0.1, within=0.2, total=0.3)
    assert difference_variance(components, 1, 0.0) == pytest.approx(2 * 0.1 + 2 * 0.2)
    assert difference_variance(components, 4, 0.75) == pytest.approx(2 * 0.25 * 0.1 + 2 * 0.2 / 4)


def _factor(n: int, alpha: float, power: float) -> float:
    return (t_quantile(1 - alpha / 2, n - 1) + t_quantile(power, n - 1)) ** 2


def test_tasks_needed_is_the_smallest_n_meeting_the_t_based_power_condition() -> None:
    """V = δ = 1: n = 10, as (t(.975, 9) + t(.8, 9))² = 9.89 ≤ 10 and (t(.975, 8) + t(.8, 8))² = 10.2 > 9."""
    assert tasks_needed(1.0, 1.0, 0.05, 0.8) == 10
    rng = random.Random(3)
    for _ in range(40):
        variance, effect = rng.uniform(0.01, 2), rng.uniform(0.02, 1)
        alpha, power = rng.choice([0.01, 0.05, 0.1]), rng.choice([0.8, 0.9, 0.95])
        n = tasks_needed(variance, effect, alpha, power)
        assert n is not None

        assert n >= _factor(n, alpha, power) * variance / effect**2
        assert n == 2 or n - 1 < _factor(n - 1, alpha, power) * variance / effect**2


def test_many_tasks_approach_the_textbook_normal_formula() -> None:
    z = (NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)) ** 2
    assert z == pytest.approx(7.849, abs=1e-3)
    n = tasks_needed(0.5, 0.01, 0.05, 0.8)
    assert n is not None
    assert math.ceil(z * 0.5 / 0.01**2) <= n <= math.ceil(z * 0.5 / 0.01**2) * 1.001


def test_hopeless_plans_and_zero_variance_have_clear_answers() -> None:
    assert tasks_needed(1.0, 1e-6, 0.05, 0.8) is None  # beyond a billion tasks
    assert tasks_needed(0.0, 0.01, 0.05, 0.8) == 2


def test_detectable_effect_inverts_tasks_needed() -> None:
    for n in (2, 7, 50, 3000):
        effect = detectable_effect(0.4, n, 0.05, 0.8)
        assert tasks_needed(0.4, effect * (1 + 1e-9), 0.05, 0.8) == n


def test_attempts_help_only_until_task_to_task_variation_dominates() -> None:
    components = VarianceComponents(tasks=50, attempts=2, between=0.02, within=0.2, total=0.22)
    k = attempts_needed(components, 400, 0.05, 0.05, 0.8, 0.0)
    assert k is not None
    assert (
        difference_variance(components, k, 0.0)
        <= 0.05**2 * 400 / (t_quantile(0.975, 399) + t_quantile(0.8, 399)) ** 2
        < difference_variance(components, k - 1, 0.0)
    )
    assert attempts_needed(components, 40, 0.05, 0.05, 0.8, 0.0) is None


@pytest.fixture
def baseline(ctx: Context, tmp_path: Path) -> tuple[Context, str, str]:
    tasks = [f"t{i:02d}" for i in range(12)]
    dataset = push_tasks(ctx, tmp_path, "plan", tasks)
    profile = make_profile(ctx, tmp_path, "team/base")
    rng = random.Random(11)
    difficulty = {t: rng.random() for t in tasks}
    job = run_job(ctx, dataset, [profile], 4, lambda _p, t, _a: float(rng.random() < difficulty[t]))
    return ctx, job, profile


def test_a_plan_lists_tasks_needed_per_attempt_count_from_the_baseline(
    baseline: tuple[Context, str, str],
) -> None:
    ctx, job, profile = baseline
    plan = plan_comparison(ctx, job, 0.1)
    assert plan.baseline.profile == profile and plan.dataset_tasks == 12
    assert [o.attempts for o in plan.options] == [1, 2, 3, 4, 5, 10]
    needed = [o.tasks or 0 for o in plan.options]
    assert all(needed)
    assert needed == sorted(needed, reverse=True)  # more attempts never need more tasks
    for option in plan.options:
        expected = tasks_needed(difference_variance(plan.variance, option.attempts, 0.0), 0.1, 0.05, 0.8)
        assert option.tasks == expected
        assert option.fits_dataset == (option.tasks is not None and option.tasks <= 12)
    paired = plan_comparison(ctx, job, 0.1, correlation=0.8)
    unpaired, pairing = plan.options[0].tasks, paired.options[0].tasks
    assert unpaired is not None and pairing is not None and pairing <= unpaired
    assert plan.baseline.coverage.startswith("score ") and plan.baseline.ci95 is not None
    assert len(plan.notes) == 2


def test_bad_planning_input_is_refused(baseline: tuple[Context, str, str], ctx: Context) -> None:
    _, job, _ = baseline
    for kwargs, message in [
        ({"effect": 0.0}, "effect must be a positive"),
        ({"effect": math.nan}, "effect must be a positive"),
        ({"effect": 0.1, "power": 0.3}, "power must be"),
        ({"effect": 0.1, "alpha": 1.0}, "alpha must"),
        ({"effect": 0.1, "correlation": 2.0}, "correlation must"),
    ]:
        with pytest.raises(UserError, match=message):
            plan_comparison(ctx, job, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(NotFoundError):
        plan_comparison(ctx, "job_missing", 0.1)


def test_a_baseline_without_variation_cannot_be_planned_from(ctx: Context, tmp_path: Path) -> None:
    dataset = push_tasks(ctx, tmp_path, "flat", ["a", "b", "c"])
    profile = make_profile(ctx, tmp_path, "team/flat")
    job = run_job(ctx, dataset, [profile], 2, lambda *_: 1.0)
    with pytest.raises(UserError, match="no variation"):
        plan_comparison(ctx, job, 0.05)


def test_cli_plan_prints_json_and_refuses_bad_input_with_exit_2(
    el: El, baseline: tuple[Context, str, str]
) -> None:
    _, job, _ = baseline
    data = el.ok("plan", "--baseline", job, "--effect", "0.1", "--json").json()
    assert {"baseline", "options", "variance", "attempts_with_all_tasks", "detectable_effect"} <= data.keys()
    assert data["options"][0]["attempts"] == 1
    text = el.ok("plan", "--baseline", job, "--effect", "0.1").stdout
    assert "to detect 10.0 pts (two-sided alpha 0.05, power 80%, correlation 0)" in text
    detectable = f"{data['detectable_effect'] * 100:.1f} pts or more"  # in points, as compare speaks
    assert f"the baseline's own design detects differences of {detectable}" in text
    refused = el("plan", "--baseline", job, "--effect", "-1")
    assert refused.code == 2 and "effect: Input should be greater than 0" in refused.stderr
