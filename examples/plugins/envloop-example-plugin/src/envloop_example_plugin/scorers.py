"""`keywords`: the share of the expected answer's words that the answer contains (case-insensitive),
so "Paris, France" against "the capital is paris" scores 0.5."""

import re

from envloop.tasks.scorers import ScoreResult

_WORD = re.compile(r"\w+")


def score_keywords(answer: str, expected: str) -> ScoreResult:
    wanted = {word.lower() for word in _WORD.findall(expected)}
    if not wanted:
        return ScoreResult(reward=None, explanation="the expected answer has no words to look for")
    found = wanted & {word.lower() for word in _WORD.findall(answer)}
    missing = ", ".join(sorted(wanted - found)) or "none"
    return ScoreResult(
        reward=len(found) / len(wanted),
        explanation=f"{len(found)} of {len(wanted)} expected words found (missing: {missing})",
    )
