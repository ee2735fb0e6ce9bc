"""Specification of the intervals and tests behind every score and comparison.

Sources: Wilson 1927, "Probable inference, the law of succession, and statistical inference"
(score interval), checked against Newcombe 1998, "Two-sided confidence intervals for the single
proportion: comparison of seven methods", Statistics in Medicine 17, Table I (method 3); Korn &
Graubard 1998, "Confidence intervals for proportions with small expected number of positive counts
estimated from survey data" (effective sample size of a clustered proportion); Miller 2024, "Adding
Error Bars to Evals" (clustered standard errors, paired differences); Student-t tail values as
published in R's pt / scipy.stats.t.sf.
"""

import math
import random
from decimal import Decimal, getcontext

import pytest

from envloop.core.metrics import AttemptSlot, compute_metrics, paired_tasks, score_interval
from envloop.core.stats import (
    Z_975,
    clustered_stderr,
    paired_difference,
    proportion_interval,
    t_interval,
    t_quantile,
    t_two_sided_p,
    wilson_interval,
)
from tests.test_metrics import JOB_CASES, metrics_for

NEWCOMBE_TABLE_I = [  # (successes, n) -> Wilson 95% bounds, four decimals
    ((81, 263), (0.2553, 0.3662)),
    ((15, 148), (0.0624, 0.1605)),
    ((0, 20), (0.0, 0.1611)),
    ((1, 29), (0.0061, 0.1718)),
]


@pytest.mark.parametrize(("counts", "bounds"), NEWCOMBE_TABLE_I)
def test_wilson_interval_matches_newcombes_published_table(
    counts: tuple[int, int], bounds: tuple[float, float]
) -> None:
    successes, n = counts
    low, high = wilson_interval(successes / n, n)
    assert (round(low, 4), round(high, 4)) == bounds


def test_wilson_bounds_are_exactly_zero_and_one_at_the_ends() -> None:
    assert wilson_interval(0.0, 10)[0] == 0.0
    assert wilson_interval(1.0, 10)[1] == 1.0
    assert wilson_interval(1.0, 5)[0] == pytest.approx(5 / (5 + Z_975**2), rel=1e-12)


def _textbook_wilson(p: str, n: str) -> tuple[Decimal, Decimal]:
    """(p + z²/2n ± z·√(p(1-p)/n + z²/4n²)) / (1 + z²/n), in 60-digit decimal arithmetic."""
    getcontext().prec = 60
    pp, nn, z = Decimal(p), Decimal(n), Decimal(repr(Z_975))
    center = pp + z * z / (2 * nn)
    half = z * (pp * (1 - pp) / nn + z * z / (4 * nn * nn)).sqrt()
    scale = 1 + z * z / nn
    return (center - half) / scale, (center + half) / scale


@pytest.mark.parametrize(("p", "n"), [("1e-9", "1e12"), ("3e-7", "1e15"), ("0.999999", "1e9")])
def test_wilson_keeps_relative_precision_where_the_textbook_form_cancels(p: str, n: str) -> None:
    """A rare pass among a trillion attempts: the lower bound is ~1e-9 and must keep its digits."""
    low, high = wilson_interval(float(p), float(n))
    exact_low, exact_high = _textbook_wilson(p, n)
    assert math.isclose(low, float(exact_low), rel_tol=1e-9)
    assert math.isclose(1 - high, float(1 - exact_high), rel_tol=1e-6)


def test_wilson_refuses_impossible_arguments() -> None:
    with pytest.raises(ValueError):
        wilson_interval(1.5, 10)
    with pytest.raises(ValueError):
        wilson_interval(0.5, 0)


def test_a_clustered_pass_rate_uses_the_korn_graubard_effective_sample_size() -> None:
    """n_eff = p(1-p)/se², shrunk by (t(N-1)/t(G-1))², then Wilson at that size."""
    clusters = [[1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 1.0]]
    values = [v for c in clusters for v in c]
    p = sum(values) / len(values)
    se = clustered_stderr(clusters)
    assert se is not None
    effective = min(len(values), p * (1 - p) / se**2)
    shrunk = effective * (t_quantile(0.975, len(values) - 1) / t_quantile(0.975, 3)) ** 2
    assert proportion_interval(p, se, 4, len(values)) == pytest.approx(wilson_interval(p, shrunk), rel=1e-12)


def test_a_perfect_pass_rate_on_five_tasks_is_not_certain() -> None:
    """Every attempt passed: no spread, so a t interval collapses to [1, 1]; each task counts once."""
    for attempts in (1, 3, 10):
        metrics = metrics_for(attempts, {t: [1] * attempts for t in "ABCDE"})
        assert metrics.stderr == 0.0
        assert metrics.ci95 is not None
        assert metrics.ci95[0] == pytest.approx(wilson_interval(1.0, 5)[0], rel=1e-12)
        assert metrics.ci95[0] == pytest.approx(0.5655, abs=1e-4)
        assert metrics.ci95[1] == 1.0
    nothing = metrics_for(2, {t: [0, 0] for t in "ABCDE"})
    assert nothing.ci95 is not None
    assert nothing.ci95[0] == 0.0
    assert nothing.ci95[1] == pytest.approx(1 - 0.5655, abs=1e-4)


def test_a_pass_rate_interval_is_the_hull_of_the_t_and_wilson_intervals() -> None:
    rng = random.Random(7)
    for _ in range(200):
        tasks = rng.randint(2, 12)
        k = rng.randint(1, 4)
        grid = {f"t{i}": [float(rng.random() < rng.random()) for _ in range(k)] for i in range(tasks)}
        metrics = metrics_for(k, grid)
        assert metrics.score is not None and metrics.stderr is not None and metrics.ci95 is not None
        t_low, t_high = t_interval(metrics.score, metrics.stderr, tasks - 1, clamp=(0.0, 1.0))
        w_low, w_high = proportion_interval(metrics.score, metrics.stderr, tasks, tasks * k)
        assert metrics.ci95 == (min(t_low, w_low), max(t_high, w_high))
        assert metrics.ci95[0] <= metrics.score <= metrics.ci95[1]


def test_partial_credit_keeps_the_clamped_t_interval() -> None:
    rewards = [0.5, 0.25, 1.0, 0.75]
    assert score_interval(0.625, 0.1, 4, 4, rewards, binary=False) == pytest.approx(
        t_interval(0.625, 0.1, 3, clamp=(0.0, 1.0))
    )


@pytest.mark.parametrize("name", sorted(JOB_CASES))
def test_every_shared_vector_gets_an_interval_around_its_score_within_the_unit_range(name: str) -> None:
    case = JOB_CASES[name]
    metrics = metrics_for(case["k"], case["tasks"])
    if metrics.stderr is None:
        assert metrics.ci95 is None
        return
    assert metrics.score is not None and metrics.ci95 is not None
    assert 0.0 <= metrics.ci95[0] <= metrics.score <= metrics.ci95[1] <= 1.0


def test_a_huge_job_gets_a_tight_interval_without_losing_precision() -> None:
    """2,000 tasks x 50 attempts with one failure: the interval hugs 0.99999 from both sides."""
    slots = [
        AttemptSlot(task=f"t{i}", attempt=a, state="scored", reward=0.0 if (i, a) == (0, 1) else 1.0)
        for i in range(2_000)
        for a in range(1, 51)
    ]
    metrics = compute_metrics([f"t{i}" for i in range(2_000)], 50, slots)
    assert metrics.score == pytest.approx(1 - 1e-5, rel=1e-15)
    assert metrics.score is not None and metrics.ci95 is not None
    assert 0.9999 < metrics.ci95[0] < metrics.score < metrics.ci95[1] <= 1.0


@pytest.mark.parametrize(("t", "df", "p"), [(2.0, 10, 0.07338803477), (1.0, 3, 0.39100221895)])
def test_two_sided_p_values_match_published_t_tails(t: float, df: int, p: float) -> None:
    assert t_two_sided_p(t, df) == pytest.approx(p, rel=1e-9)
    assert t_two_sided_p(-t, df) == t_two_sided_p(t, df)


@pytest.mark.parametrize("t", [0.5, 3.0, 1e3, 1e6])
def test_tiny_p_values_keep_their_digits_against_the_closed_forms(t: float) -> None:
    """df 1: p = 2·atan(1/t)/π. df 2: p = 1 - t/s with s = √(2 + t²), written 2/(s(s + t))."""
    assert t_two_sided_p(t, 1) == pytest.approx(2 * math.atan(1 / t) / math.pi, rel=1e-9)
    s = math.sqrt(2 + t * t)
    assert t_two_sided_p(t, 2) == pytest.approx(2 / (s * (s + t)), rel=1e-9)


@pytest.mark.parametrize("df", [1, 2, 4, 9, 29, 200])
def test_the_critical_t_value_has_a_p_value_of_five_percent(df: int) -> None:
    assert t_two_sided_p(t_quantile(0.975, df), df) == pytest.approx(0.05, rel=1e-9)
    assert t_two_sided_p(0.0, df) == 1.0


def test_the_paired_p_value_is_the_t_test_of_the_per_task_differences() -> None:
    a = [0.9, 0.8, 0.4, 0.6, 1.0]
    b = [0.7, 0.7, 0.1, 0.6, 0.8]
    result = paired_difference(a, b)
    assert result.mean_difference is not None and result.stderr is not None
    assert result.p_value == pytest.approx(t_two_sided_p(result.mean_difference / result.stderr, 4))
    assert paired_difference([1.0, 0.5], [0.5, 0.0]).p_value is None  # identical differences: no spread


def test_paired_tasks_report_b_minus_a_and_leave_one_sided_tasks_out() -> None:
    paired = paired_tasks({"x": 0.5, "y": 1.0, "only-a": 0.0}, {"y": 0.5, "x": 1.0, "only-b": 1.0})
    assert [(t.task, t.difference) for t in paired.tasks] == [("x", 0.5), ("y", -0.5)]
    assert (paired.only_a, paired.only_b) == (["only-a"], ["only-b"])
    assert paired.difference.tasks == 2
    assert paired.difference.mean_difference == 0.0
    assert paired.difference.correlation == pytest.approx(-1.0)


def test_a_paired_interval_of_rates_is_cut_at_minus_one_and_one_and_says_so() -> None:
    """B - A per task: -1, -1, -0.5 (three tasks): the t interval alone reaches about -1.55."""
    paired = paired_tasks({"x": 1.0, "y": 1.0, "z": 0.5}, {"x": 0.0, "y": 0.0, "z": 0.0}, rates=True)
    unbounded = paired_tasks({"x": 1.0, "y": 1.0, "z": 0.5}, {"x": 0.0, "y": 0.0, "z": 0.0})
    assert unbounded.difference.ci95 is not None and unbounded.difference.ci95[0] < -1.5
    assert not unbounded.difference.clamped
    assert paired.difference.ci95 == (-1.0, unbounded.difference.ci95[1])
    assert paired.difference.clamped


def test_the_paired_interval_and_p_value_come_from_one_t_test_and_never_disagree() -> None:
    """0 lies outside the 95% interval exactly when p < 0.05, for binary, graded and raw values."""
    rng = random.Random(11)
    for case in range(300):
        tasks = rng.randint(2, 15)
        kind = case % 3
        if kind == 0:
            a = [float(rng.random() < 0.5) for _ in range(tasks)]
            b = [float(rng.random() < 0.7) for _ in range(tasks)]
        elif kind == 1:
            a = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) for _ in range(tasks)]
            b = [min(1.0, x + rng.choice([0.0, 0.25, 0.5])) for x in a]
        else:
            a = [rng.gauss(5, 2) for _ in range(tasks)]
            b = [x + rng.gauss(1, 1) for x in a]
        result = paired_difference(b, a, rates=kind < 2)
        if result.ci95 is None:
            assert result.p_value is None and result.no_interval
            continue
        assert result.p_value is not None and result.stderr is not None
        assert result.mean_difference is not None
        t = result.mean_difference / result.stderr
        assert result.p_value == pytest.approx(t_two_sided_p(t, tasks - 1), rel=1e-12)
        low, high = result.ci95
        if abs(result.p_value - 0.05) > 1e-9:
            assert (low > 0 or high < 0) == (result.p_value < 0.05)


def test_differences_without_spread_have_neither_interval_nor_p_value_and_say_why() -> None:
    """Ten tasks that all moved by +1: the t test has no spread to measure; a point interval would
    claim a certainty ten tasks cannot give, so there is none, and the reason is given."""
    paired = paired_tasks({str(i): 0.0 for i in range(10)}, {str(i): 1.0 for i in range(10)}, rates=True)
    difference = paired.difference
    assert difference.mean_difference == 1.0 and difference.stderr == 0.0
    assert difference.ci95 is None and difference.p_value is None
    assert difference.no_interval is not None and "no spread" in difference.no_interval
    single = paired_tasks({"x": 0.0}, {"x": 1.0}, rates=True).difference
    assert single.ci95 is None and single.no_interval == "one task measured by both sides: a t test needs two"
