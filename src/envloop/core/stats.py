"""Estimators and uncertainty for evaluation results: pure arithmetic, no dependencies beyond the stdlib.

These live here because every metric surface needs them and none should re-derive them:

- the unbiased per-task estimators pass@k (Chen et al. 2021, "Evaluating Large Language Models
  Trained on Code") and pass^k (Yao et al. 2024, "τ-bench"), for every k up to n at once;
- the standard error of a mean clustered by task, following Miller 2024, "Adding Error Bars to
  Evals: A Statistical Approach to Language Model Evaluations": attempts of one task share the
  task's difficulty, so treating them as independent understates the uncertainty;
- a Student-t quantile, so intervals stay honest for small task counts without importing scipy;
- a Wilson score interval for pass rates at a cluster-aware effective sample size (Korn & Graubard
  1998), which stays honest where a symmetric interval fails: few tasks, and rates of 0% or 100%.
"""

import math
from collections.abc import Iterator, Sequence
from statistics import NormalDist

from pydantic import ConfigDict

from envloop.core.lazy import LazyModel


def estimator_curves(n: int, c: int) -> tuple[list[float], list[float]]:
    """pass@k' and pass^k' for k' = 1..n, for one task with n scored attempts and c passes.

    pass@k' = 1 - C(n-c, k')/C(n, k') = (C(n, k') - C(n-c, k'))/C(n, k') and
    pass^k' = C(c, k')/C(n, k'), each an exact ratio of integers rounded once to the nearest float
    (Python's int / int is correctly rounded): n = 5, c = 3 gives pass^3 = 0.1, not
    0.09999999999999999, and a tiny pass@k' keeps its relative precision. The binomials are built
    incrementally, so the whole curve costs O(n) operations on integers of at most n bits.
    """
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    pass_at: list[float] = []
    pass_hat: list[float] = []
    for total, miss, all_pass in _binomial_rows(n, {c: 1}):
        pass_at.append((total - miss) / total)
        pass_hat.append(all_pass / total)
    return pass_at, pass_hat


def curve_sums(n: int, passes: dict[int, int]) -> list[tuple[int, int, int]]:
    """For tasks that all have n scored attempts, `passes` mapping a pass count c to how many tasks
    have it: for k' = 1..n, (C(n, k'), Σ pass@k'·C(n, k'), Σ pass^k'·C(n, k')) summed over those
    tasks, all exact integers, so a caller can average them and round only once.
    """
    weight = sum(passes.values())
    return [(total, weight * total - miss, all_pass) for total, miss, all_pass in _binomial_rows(n, passes)]


def _binomial_rows(n: int, passes: dict[int, int]) -> Iterator[tuple[int, int, int]]:
    """(C(n, k), Σ w·C(n-c, k), Σ w·C(c, k)) for k = 1..n over the weighted pass counts c.

    Each binomial is updated from the previous one: C(m, k) = C(m, k-1)·(m-k+1)/k, exact.
    """
    total = 1
    misses = dict.fromkeys(passes, 1)
    alls = dict.fromkeys(passes, 1)
    for k in range(1, n + 1):
        total = total * (n - k + 1) // k
        miss_sum = all_sum = 0
        for c, weight in passes.items():
            misses[c] = misses[c] * (n - c - k + 1) // k if k <= n - c else 0
            alls[c] = alls[c] * (c - k + 1) // k if k <= c else 0
            miss_sum += weight * misses[c]
            all_sum += weight * alls[c]
        yield total, miss_sum, all_sum


def clustered_stderr(clusters: Sequence[Sequence[float]]) -> float | None:
    """Cluster-robust standard error of the attempt-weighted mean of all values.

    With G clusters (tasks), N values and residuals e = y - ȳ, the variance of ȳ is
    G/(G-1) · Σ_g (Σ_j e_gj)² / N² (Miller 2024, section 2.3, with the usual small-sample factor).
    With one value per cluster it reduces to the textbook s/√N. Empty clusters are ignored; fewer
    than two non-empty clusters leave the variance unidentified, hence None.
    """
    groups = [group for group in clusters if len(group)]
    count = len(groups)
    if count < 2:
        return None
    total = sum(len(group) for group in groups)
    mean = math.fsum(math.fsum(group) for group in groups) / total
    squares = math.fsum((math.fsum(group) - len(group) * mean) ** 2 for group in groups)
    return math.sqrt(count / (count - 1) * squares) / total


def t_interval(
    mean: float, stderr: float, df: int, *, clamp: tuple[float, float] | None = None
) -> tuple[float, float]:
    """Two-sided 95% interval mean ± t(0.975, df)·stderr, optionally clamped (pass rates live in [0, 1])."""
    half = t_quantile(0.975, df) * stderr
    low, high = mean - half, mean + half
    if clamp is not None:
        low, high = max(low, clamp[0]), min(high, clamp[1])
    return low, high


Z_975 = NormalDist().inv_cdf(0.975)


def wilson_interval(p: float, n: float, z: float = Z_975) -> tuple[float, float]:
    """Wilson (1927) score interval for a proportion p observed over n trials; n may be fractional.

    The textbook form (p + z²/2n ± z·s)/(1 + z²/n), s = √(p(1-p)/n + z²/4n²), subtracts two nearly
    equal numbers for the lower bound when p is small (and for the upper one when p is close to 1).
    Multiplying through by the conjugate gives lower = p² / (p + z²/2n + z·s), and symmetrically
    upper = 1 - q² / (q + z²/2n + z·s) with q = 1 - p: no cancellation, exact 0 and 1 at the ends.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"a proportion must be in [0, 1], got {p}")
    if not n > 0:
        raise ValueError(f"the sample size must be positive, got {n}")
    half_z2_over_n = z * z / (2 * n)
    spread = half_z2_over_n + z * math.sqrt(p * (1 - p) / n + half_z2_over_n / (2 * n))
    q = 1.0 - p
    lower = p * p / (p + spread) if p > 0 else 0.0
    upper = 1.0 - q * q / (q + spread) if q > 0 else 1.0
    return lower, upper


def proportion_interval(p: float, stderr: float, clusters: int, values: int) -> tuple[float, float]:
    """95% interval of a pass rate: the mean of `values` binary rewards from `clusters` tasks.

    Korn & Graubard (1998, "Confidence intervals for proportions with small expected number of
    positive counts estimated from survey data") turn the clustered variance into an effective
    sample size n_eff = p(1-p)/stderr² (capped at the real count), shrink it by
    (t(n-1)/t(clusters-1))² so few tasks widen the interval as a t interval would, and use it in a
    binomial interval; here the Wilson one. When every reward is 0 or every reward is 1 the spread
    is zero and cannot say how alike a task's attempts are, so each task counts as one observation.
    """
    if clusters < 2 or values < clusters:
        raise ValueError(f"need at least two tasks and one value per task, got {clusters} and {values}")
    if p in (0.0, 1.0):
        return wilson_interval(p, clusters)
    effective = values if stderr == 0 else min(values, p * (1 - p) / (stderr * stderr))
    shrink = (t_quantile(0.975, values - 1) / t_quantile(0.975, clusters - 1)) ** 2
    return wilson_interval(p, effective * shrink)


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| ≥ |t|) for Student's t with df degrees of freedom: the two-sided p-value of t."""
    if not df > 0:
        raise ValueError(f"df must be positive, got {df}")
    return min(1.0, 2.0 * _t_upper_tail(abs(t), df))


def t_quantile(p: float, df: float) -> float:
    """Quantile of Student's t distribution with df > 0 degrees of freedom, to ~1e-12 relative.

    df 1 and 2 have closed forms; otherwise Newton's method on the exact upper-tail probability
    (a regularized incomplete beta function) starts from the normal quantile, guarded by a bracket
    so it cannot diverge in the heavy tails of small df.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if not df > 0:
        raise ValueError(f"df must be positive, got {df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    target = 1.0 - p
    low = NormalDist().inv_cdf(p)  # t's tails are heavier, so its quantile is never smaller
    high = 2 * low
    while _t_upper_tail(high, df) > target:
        low, high = high, 2 * high
    point = low
    for _ in range(200):
        excess = _t_upper_tail(point, df) - target
        if excess > 0:
            low = point
        else:
            high = point
        step = excess / _t_density(point, df)
        candidate = point + step
        if not low < candidate < high:
            candidate = (low + high) / 2
        if abs(candidate - point) <= 1e-14 * abs(candidate):
            return candidate
        point = candidate
    raise ArithmeticError(f"t quantile did not converge for p={p}, df={df}")


def _t_upper_tail(t: float, df: float) -> float:
    """P(T > t) for t >= 0, computed directly so a small tail is not lost to 1 - cdf cancellation."""
    return 0.5 * _regularized_beta(df / (df + t * t), df / 2, 0.5)


def _t_density(t: float, df: float) -> float:
    log_density = (
        math.lgamma((df + 1) / 2)
        - math.lgamma(df / 2)
        - 0.5 * math.log(df * math.pi)
        - (df + 1) / 2 * math.log1p(t * t / df)
    )
    return math.exp(log_density)


def _regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), by its continued fraction on whichever side of the mean converges quickly."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(1.0 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    """Modified Lentz evaluation of the incomplete-beta continued fraction."""
    tiny = 1e-300
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 100_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-16:
            return result
    raise ArithmeticError(f"incomplete beta fraction did not converge for x={x}, a={a}, b={b}")


PAIRED_METHOD = (
    "paired t test on the per-task differences (n - 1 degrees of freedom): the 95% interval is "
    "mean ± t·s.e. and the p-value is that test's, so 0 lies outside the interval exactly when p < 0.05"
)


class PairedDifference(LazyModel):
    """Mean of per-task differences a - b over tasks both sides measured, with its uncertainty.

    Pairing by task removes the between-task variance both runs share (Miller 2024, section 4),
    which is why two models that are close on average can still be told apart. `correlation` is
    the Pearson correlation of the per-task values: the higher it is, the more pairing helps.

    The interval and the p-value come from one method, the paired t test (`PAIRED_METHOD`), so they
    never disagree. Where that test cannot measure the uncertainty (fewer than two tasks, or every
    task moved by exactly the same amount, which leaves no spread) both are null and
    `no_interval` says why: a point interval would claim a certainty three tasks cannot give.
    `clamped` says the t interval reached past the possible range of a difference of two rates,
    [-1, 1], and was cut there (0 lies inside that range, so the cut never changes the verdict).
    """

    model_config = ConfigDict(frozen=True)

    tasks: int
    mean_difference: float | None
    stderr: float | None
    ci95: tuple[float, float] | None
    correlation: float | None
    p_value: float | None = None
    clamped: bool = False
    no_interval: str | None = None


def paired_difference(a: Sequence[float], b: Sequence[float], *, rates: bool = False) -> PairedDifference:
    """Compare two equally long sequences of per-task values (same tasks, same order).

    `rates`: every value lies in [0, 1] (means of rewards in [0, 1]), so the difference lies in
    [-1, 1] and the t interval is cut there.
    """
    if len(a) != len(b):
        raise ValueError(f"paired values need equal lengths, got {len(a)} and {len(b)}")
    count = len(a)
    if count == 0:
        return PairedDifference(
            tasks=0,
            mean_difference=None,
            stderr=None,
            ci95=None,
            correlation=None,
            no_interval="no task was measured by both sides",
        )
    differences = [x - y for x, y in zip(a, b, strict=True)]
    mean = math.fsum(differences) / count
    if count < 2:
        return PairedDifference(
            tasks=count,
            mean_difference=mean,
            stderr=None,
            ci95=None,
            correlation=None,
            no_interval="one task measured by both sides: a t test needs two",
        )
    variance = math.fsum((d - mean) ** 2 for d in differences) / (count - 1)
    stderr = math.sqrt(variance / count)
    correlation = _pearson(a, b)
    if stderr == 0:
        return PairedDifference(
            tasks=count,
            mean_difference=mean,
            stderr=stderr,
            ci95=None,
            correlation=correlation,
            no_interval=f"every task moved by the same amount: no spread to measure the uncertainty from "
            f"({count} tasks are not a certainty)",
        )
    unclamped = t_interval(mean, stderr, count - 1)
    low, high = unclamped
    if rates:
        low, high = max(low, -1.0), min(high, 1.0)
    return PairedDifference(
        tasks=count,
        mean_difference=mean,
        stderr=stderr,
        ci95=(low, high),
        correlation=correlation,
        p_value=t_two_sided_p(mean / stderr, count - 1),
        clamped=(low, high) != unclamped,
    )


def _pearson(a: Sequence[float], b: Sequence[float]) -> float | None:
    """None when either side is constant: a correlation with no variation is undefined, not 0."""
    mean_a = math.fsum(a) / len(a)
    mean_b = math.fsum(b) / len(b)
    cov = math.fsum((x - mean_a) * (y - mean_b) for x, y in zip(a, b, strict=True))
    var_a = math.fsum((x - mean_a) ** 2 for x in a)
    var_b = math.fsum((y - mean_b) ** 2 for y in b)
    if var_a == 0 or var_b == 0:
        return None
    return max(-1.0, min(1.0, cov / math.sqrt(var_a * var_b)))
