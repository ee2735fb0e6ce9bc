"""How a score reads to a person: one format for jobs, per-task results and the leaderboard alike.

Values in [0, 1] are rates and show as percentages; anything else is a raw reward on its own
scale. A score is never shown without its coverage, so `coverage_line` is the way to print one.
"""

from typing import Literal

from envloop.core.metrics import ProfileMetrics

MISSING = "—"

DifferenceUnit = Literal["points", "reward"]
"""How a difference B - A reads: `points` (percentage points) when both sides are rates in [0, 1],
which show as percentages; `reward` on the rewards' own scale otherwise."""


def format_score(x: float | None) -> str:
    """0.75 → "75%", 0.6667 → "66.7%", 1 → "100%", 3.5 → "3.5", None → "—".

    Rounding never turns a partial rate into an absolute one: 0.9996 shows as ">99.9%" rather than
    "100%", and 0.0004 as "<0.1%" rather than "0%".
    """
    if x is None:
        return MISSING
    if 0.0 <= x <= 1.0:
        text = _trim(f"{x * 100:.1f}")
        if text == "100" and x < 1.0:
            return ">99.9%"
        if text == "0" and x > 0.0:
            return "<0.1%"
        return f"{text}%"
    text = _trim(f"{x:.3f}")
    return text if text not in ("0", "-0") else f"{x:.3g}"


def coverage_line(m: ProfileMetrics) -> str:
    """`score 60%, 5/6 attempts scored, 2/3 members complete`: the score and how much it stands on."""
    counts = m.score_counts
    return (
        f"score {format_score(m.score)}, {counts.scored}/{counts.total} attempts scored, "
        f"{counts.complete_members}/{counts.total_members} members complete"
    )


def format_difference(x: float | None, unit: DifferenceUnit, *, sign: bool = True) -> str:
    """A difference of two scores: 0.125 → "+12.5 pts" between rates, "+0.125" on a raw scale.

    One format for every surface, so a console, a terminal and a report never print the same
    comparison in two units. `sign=False` is for spreads such as a standard error."""
    if x is None:
        return MISSING
    if unit == "points":
        return f"{x * 100:{'+' if sign else ''}.1f} pts"
    return f"{x:{'+' if sign else ''}.4g}"


def format_interval(ci95: tuple[float, float] | None, *, as_score: bool = True) -> str:
    """The two bounds of an interval, joined by an en dash: as percents for a score (`40%`, `70%`),
    as numbers for a mean on its own scale (`0.25`, `0.75`). One way wherever a person reads them."""
    if ci95 is None:
        return MISSING
    low, high = ci95
    if as_score:
        return f"{format_score(low)} – {format_score(high)}"
    return f"{low:.4g} – {high:.4g}"


def format_difference_interval(ci95: tuple[float, float] | None, unit: DifferenceUnit) -> str:
    """`-78.6 to -1.8 pts`: the two bounds of a difference's interval, in the difference's unit."""
    if ci95 is None:
        return MISSING
    low, high = ci95
    if unit == "points":
        return f"{low * 100:+.1f} to {high * 100:+.1f} pts"
    return f"{low:+.4g} to {high:+.4g}"


def format_duration(seconds: float | None) -> str:
    """480 ms, 3.25 s, 4.2 min: one format for every time a person reads."""
    if seconds is None:
        return MISSING
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    return f"{seconds / 60:.1f} min"


def format_cost(amount: float | None, currency: str | None) -> str:
    """$0.0123, $12.40, 3.50 EUR: small amounts keep four decimals, so a cheap run never reads as 0."""
    if amount == 0:
        return "0"  # no tokens, nothing to pay: true in any currency, with or without a price table
    if amount is None or currency is None:
        return MISSING
    number = f"{amount:.4f}" if 0 < amount < 1 else f"{amount:.2f}"
    return f"${number}" if currency == "USD" else f"{number} {currency}"


def _trim(number: str) -> str:
    return number.rstrip("0").rstrip(".") if "." in number else number
