"""The built-in scorers of JSONL datasets: an answer against a row's expected answer → 1.0 or 0.0,
with a sentence saying why.

- `exact`: equal after trimming surrounding whitespace from both.
- `includes`: the expected text occurs in the answer (case-sensitive).
- `regex`: the expected pattern matches somewhere in the answer (a search, with the syntax of
  Python's `re`; inline flags such as `(?i)` or `(?s)` are the pattern's own business). A search
  that runs longer than `REGEX_TIMEOUT_SEC` (a pattern that backtracks catastrophically on this
  answer) is stopped: the attempt gets no reward and says why, and the worker is not held up.
- `numeric`: both read as numbers the way `parse_numeric` reads them (surrounding space, a leading
  `$` and thousands separators tolerated) and are equal within a relative 1e-9; an answer that is
  not a number scores 0.
"""

import math

import regex
from pydantic import BaseModel

from envloop.tasks.jsonl import SCORERS, parse_numeric

_QUOTE_LIMIT = 80
REGEX_TIMEOUT_SEC = 1.0


class ScoreResult(BaseModel):
    reward: float | None
    """None: the scorer could not decide (the explanation says why)."""
    explanation: str

    @property
    def passed(self) -> bool:
        return self.reward == 1.0


def _quote(text: str) -> str:
    return repr(text if len(text) <= _QUOTE_LIMIT else text[:_QUOTE_LIMIT] + "…")


def _result(passed: bool, explanation: str) -> ScoreResult:
    return ScoreResult(reward=1.0 if passed else 0.0, explanation=explanation)


def score_exact(answer: str, expected: str) -> ScoreResult:
    got, want = answer.strip(), expected.strip()
    if got == want:
        return _result(True, f"the trimmed answer equals {_quote(want)}")
    return _result(False, f"the trimmed answer {_quote(got)} differs from {_quote(want)}")


def score_includes(answer: str, expected: str) -> ScoreResult:
    if expected in answer:
        return _result(True, f"the answer contains {_quote(expected)}")
    return _result(False, f"the answer does not contain {_quote(expected)}")


def score_regex(answer: str, expected: str) -> ScoreResult:
    try:
        match = regex.search(expected, answer, timeout=REGEX_TIMEOUT_SEC)
    except regex.error as exc:
        raise ValueError(f"expected answer {expected!r} is not a valid regular expression ({exc})") from None
    except TimeoutError:
        why = f"/{expected}/ did not finish within {REGEX_TIMEOUT_SEC:g} s on this answer"
        return ScoreResult(reward=None, explanation=why + " (catastrophic backtracking?)")
    if match is not None:
        return _result(True, f"/{expected}/ matches {_quote(match.group(0))}")
    return _result(False, f"/{expected}/ matches nowhere in the answer")


def score_numeric(answer: str, expected: str) -> ScoreResult:
    want = parse_numeric(expected)
    if want is None:
        raise ValueError(f"expected answer {expected!r} is not a number")
    got = parse_numeric(answer)
    if got is None:
        return _result(False, f"the answer {_quote(answer.strip())} is not a number (expected {want:g})")
    if math.isclose(got, want, rel_tol=1e-9):
        return _result(True, f"{got:g} equals {want:g}")
    return _result(False, f"{got:g} differs from {want:g}")


_SCORERS = {
    "exact": score_exact,
    "includes": score_includes,
    "regex": score_regex,
    "numeric": score_numeric,
}


def score(scorer: str, answer: str, expected: str) -> ScoreResult:
    """Score with a built-in scorer; ValueError for an unknown scorer or an unusable expected answer
    (push-time validation refuses both, so this only happens to hand-built data)."""
    function = _SCORERS.get(scorer)
    if function is None:
        raise ValueError(f"unknown scorer {scorer!r} (choose one of {', '.join(SCORERS)})")
    return function(answer, expected)
