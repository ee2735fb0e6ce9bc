"""How a score reads to a person: one format for jobs, per-task results and the leaderboard alike.

Values in [0, 1] are rates and show as percentages; anything else is a raw reward on its own
scale. A score is never shown without its coverage, so `coverage_line` is the way to print one.
"""

from envloop.core.metrics import ProfileMetrics

MISSING = "—"


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


def _trim(number: str) -> str:
    return number.rstrip("0").rstrip(".") if "." in number else number
