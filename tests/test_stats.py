"""Specification of the estimators and uncertainty in envloop.core.stats.

Sources: Chen et al. 2021, "Evaluating Large Language Models Trained on Code" (unbiased pass@k);
Yao et al. 2024, "τ-bench" (pass^k); Miller 2024, "Adding Error Bars to Evals: A Statistical
Approach to Language Model Evaluations" (clustered and paired standard errors).
"""

import math
import statistics
from fractions import Fraction

import pytest

from envloop.core.metrics import AttemptSlot, compute_metrics
from envloop.core.stats import (
    clustered_stderr,
    estimator_curves,
    paired_difference,
    t_interval,
    t_quantile,
)

# Student-t 0.975 quantiles from published tables (R's qt / scipy.stats.t.ppf), df -> t.
T_975 = {
    1: 12.706204736,
    2: 4.302652730,
    3: 3.182446305,
    4: 2.776445105,
    5: 2.570581836,
    10: 2.228138852,
    30: 2.042272456,
    100: 1.983971519,
    1000: 1.962339081,
}


def exact_pass_at(n: int, c: int, k: int) -> Fraction:
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def exact_pass_hat(n: int, c: int, k: int) -> Fraction:
    return Fraction(math.comb(c, k), math.comb(n, k))


def assert_close(actual: float, expected: Fraction | float) -> None:
    """Relative 1e-9; values below 1e-290 are compared absolutely, where doubles run out of bits."""
    assert math.isclose(actual, float(expected), rel_tol=1e-9, abs_tol=1e-290), (actual, float(expected))


def test_estimators_equal_the_exact_binomial_ratios_for_every_small_case() -> None:
    """Chen et al. 2021 eq. 1 and the τ-bench pass^k, against exact rational arithmetic."""
    for n in range(1, 16):
        for c in range(n + 1):
            pass_at, pass_hat = estimator_curves(n, c)
            assert len(pass_at) == len(pass_hat) == n
            for k in range(1, n + 1):
                assert_close(pass_at[k - 1], exact_pass_at(n, c, k))
                assert_close(pass_hat[k - 1], exact_pass_hat(n, c, k))


def test_every_estimator_up_to_thirty_attempts_is_the_exact_ratio_rounded_once() -> None:
    """Bit for bit, not approximately: n = 5, c = 3 gives pass^3 = 0.1, never 0.09999999999999999."""
    for n in range(1, 31):
        for c in range(n + 1):
            pass_at, pass_hat = estimator_curves(n, c)
            assert pass_at == [float(exact_pass_at(n, c, k)) for k in range(1, n + 1)], (n, c)
            assert pass_hat == [float(exact_pass_hat(n, c, k)) for k in range(1, n + 1)], (n, c)
    assert estimator_curves(5, 3)[1][2] == 0.1


def test_a_job_curve_is_the_exact_task_mean_rounded_once() -> None:
    """Three tasks each at pass^1 = 0.1: a float sum would give 0.30000000000000004 / 3."""
    for n in range(1, 31):
        for c in range(n + 1):
            rewards = [1.0] * c + [0.0] * (n - c)
            metrics = compute_metrics(["a", "b", "c"], n, _slots(["a", "b", "c"], rewards))
            assert metrics.curve is not None
            got = [(p.pass_at_k, p.pass_hat_k) for p in metrics.curve]
            want = [(float(exact_pass_at(n, c, k)), float(exact_pass_hat(n, c, k))) for k in range(1, n + 1)]
            assert got == want, (n, c)
    mixed = compute_metrics(
        ["a", "b"], 5, _slots(["a"], [1.0, 1.0, 1.0, 0.0, 0.0]) + _slots(["b"], [1.0, 0.0])
    )
    assert mixed.curve is not None
    two = mixed.curve[1]
    assert two.pass_hat_k == float((exact_pass_hat(5, 3, 2) + exact_pass_hat(2, 1, 2)) / 2)
    assert two.pass_at_k == float((exact_pass_at(5, 3, 2) + exact_pass_at(2, 1, 2)) / 2)


def _slots(tasks: list[str], rewards: list[float]) -> list[AttemptSlot]:
    return [
        AttemptSlot(task, attempt, "scored", reward)
        for task in tasks
        for attempt, reward in enumerate(rewards, start=1)
    ]


def test_estimators_stay_accurate_for_two_thousand_attempts_with_half_passing() -> None:
    """C(2000, 1000) has 600 digits: the ratio must come from the product form, not the binomials."""
    n, c = 2000, 1000
    pass_at, pass_hat = estimator_curves(n, c)
    for k in (1, 2, 10, 100, 500, 999, 1000, 1001, 1500, 2000):
        assert_close(pass_at[k - 1], exact_pass_at(n, c, k))
        assert_close(pass_hat[k - 1], exact_pass_hat(n, c, k))
    assert pass_at[999] == 1.0
    assert 0.0 <= pass_hat[999] < 1e-290


def test_rare_successes_keep_relative_precision_in_pass_at_k() -> None:
    """One pass among 5000 attempts: pass@k is small and must not be lost to 1 - (almost 1)."""
    n, c = 5000, 1
    pass_at, _ = estimator_curves(n, c)
    for k in (1, 2, 7, 2500, 4999):
        assert_close(pass_at[k - 1], exact_pass_at(n, c, k))
    n, c = 4000, 3
    pass_at, pass_hat = estimator_curves(n, c)
    for k in (1, 3, 1000, 2000):
        assert_close(pass_at[k - 1], exact_pass_at(n, c, k))
        assert_close(pass_hat[k - 1], exact_pass_hat(n, c, k))


def test_unbiased_estimators_differ_from_plugging_in_the_success_rate() -> None:
    """n=5, c=3, k=2 gives 0.9 and 0.3; 1-(1-p)^k and p^k would give 0.84 and 0.36."""
    pass_at, pass_hat = estimator_curves(5, 3)
    assert pass_at[1] == pytest.approx(0.9, rel=1e-12)
    assert pass_hat[1] == pytest.approx(0.3, rel=1e-12)
    success_rate = 3 / 5
    plug_in_at, plug_in_hat = 1 - (1 - success_rate) ** 2, success_rate**2
    assert plug_in_at == pytest.approx(0.84)
    assert plug_in_hat == pytest.approx(0.36)


def test_estimators_reject_more_passes_than_attempts() -> None:
    with pytest.raises(ValueError):
        estimator_curves(3, 4)


def test_no_pass_gives_exactly_zero_not_negative_zero() -> None:
    pass_at, _ = estimator_curves(4, 0)
    assert all(math.copysign(1.0, value) == 1.0 and value == 0.0 for value in pass_at)


def test_clustered_stderr_with_one_attempt_per_task_is_the_textbook_stderr() -> None:
    values = [0.2, 0.9, 0.4, 1.0, 0.0, 0.7]
    expected = statistics.stdev(values) / math.sqrt(len(values))
    stderr = clustered_stderr([[v] for v in values])
    assert stderr is not None
    assert stderr == pytest.approx(expected, rel=1e-12)


def test_clustered_stderr_follows_the_cluster_robust_formula() -> None:
    """Miller 2024: Var(mean) = G/(G-1) * sum over tasks of (sum of residuals)^2 / N^2."""
    clusters = [[1.0, 1.0, 0.0], [0.0, 0.0], [1.0], [0.5, 1.0]]
    values = [v for cluster in clusters for v in cluster]
    mean = sum(values) / len(values)
    groups = len(clusters)
    by_hand = sum(sum(v - mean for v in cluster) ** 2 for cluster in clusters)
    expected = math.sqrt(groups / (groups - 1) * by_hand / len(values) ** 2)
    stderr = clustered_stderr(clusters)
    assert stderr is not None
    assert stderr == pytest.approx(expected, rel=1e-12)


def test_correlated_attempts_widen_the_error_bar_compared_with_treating_them_as_independent() -> None:
    """Two tasks, each always passed or always failed: four attempts carry two tasks' information."""
    clustered = clustered_stderr([[1.0, 1.0], [0.0, 0.0]])
    naive = statistics.stdev([1.0, 1.0, 0.0, 0.0]) / 2
    assert clustered == pytest.approx(0.5)
    assert naive == pytest.approx(0.288675, rel=1e-5)


def test_stderr_needs_two_tasks_with_scored_attempts() -> None:
    assert clustered_stderr([[1.0, 0.0, 1.0]]) is None
    assert clustered_stderr([[1.0, 0.0], []]) is None
    assert clustered_stderr([]) is None


@pytest.mark.parametrize(("df", "expected"), sorted(T_975.items()))
def test_t_quantile_matches_published_tables(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, rel=1e-9)
    assert t_quantile(0.025, df) == pytest.approx(-expected, rel=1e-9)


@pytest.mark.parametrize("p", [0.6, 0.9, 0.975, 0.995, 0.9999])
def test_t_quantile_inverts_the_closed_form_cdf_for_three_degrees_of_freedom(p: float) -> None:
    t = t_quantile(p, 3)
    cdf = 0.5 + (t / (math.sqrt(3) * (1 + t * t / 3)) + math.atan(t / math.sqrt(3))) / math.pi
    assert cdf == pytest.approx(p, abs=1e-13)


def test_t_quantile_approaches_the_normal_quantile_for_many_degrees_of_freedom() -> None:
    z = statistics.NormalDist().inv_cdf(0.975)
    assert t_quantile(0.975, 10_000) == pytest.approx(z + (z**3 + z) / (4 * 10_000), rel=1e-7)
    assert t_quantile(0.975, 1e9) == pytest.approx(z, rel=1e-8)
    assert t_quantile(0.5, 7) == 0.0


def test_t_quantile_rejects_impossible_arguments() -> None:
    with pytest.raises(ValueError):
        t_quantile(1.0, 5)
    with pytest.raises(ValueError):
        t_quantile(0.9, 0)


def test_pass_rate_intervals_are_clamped_to_the_unit_interval() -> None:
    low, high = t_interval(0.9, 0.2, 3, clamp=(0.0, 1.0))
    assert low == pytest.approx(0.9 - T_975[3] * 0.2, rel=1e-9)
    assert high == 1.0
    assert t_interval(0.9, 0.2, 3)[1] == pytest.approx(0.9 + T_975[3] * 0.2, rel=1e-9)


def test_paired_difference_uses_per_task_differences() -> None:
    """Miller 2024, section 4: SE of the mean of per-task differences."""
    a = [0.9, 0.8, 0.4, 0.6, 1.0]
    b = [0.7, 0.7, 0.1, 0.6, 0.8]
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    result = paired_difference(a, b)
    assert result.tasks == 5
    assert result.mean_difference == pytest.approx(statistics.mean(diffs), rel=1e-12)
    assert result.stderr == pytest.approx(statistics.stdev(diffs) / math.sqrt(5), rel=1e-12)
    assert result.ci95 is not None
    half = T_975[4] * statistics.stdev(diffs) / math.sqrt(5)
    assert result.ci95[0] == pytest.approx(statistics.mean(diffs) - half, rel=1e-9)
    assert result.ci95[1] == pytest.approx(statistics.mean(diffs) + half, rel=1e-9)
    assert result.correlation == pytest.approx(statistics.correlation(a, b), rel=1e-12)


def test_paired_difference_has_no_correlation_for_a_constant_side_and_no_stderr_for_one_task() -> None:
    assert paired_difference([1.0, 1.0, 1.0], [0.0, 1.0, 0.5]).correlation is None
    single = paired_difference([0.5], [0.25])
    assert single.mean_difference == 0.25
    assert single.stderr is None
    assert single.ci95 is None
    empty = paired_difference([], [])
    assert empty.tasks == 0
    assert empty.mean_difference is None
    with pytest.raises(ValueError):
        paired_difference([1.0], [1.0, 0.0])
