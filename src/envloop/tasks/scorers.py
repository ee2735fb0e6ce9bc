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

Plugins add scorers under the entry point group `envloop.scorers`: a function
`(answer: str, expected: str) -> ScoreResult` (or a class whose instances are such callables),
named by its entry point. A dataset may also name an allowed `module:function` reference
(`envloop.plugins.references`). A plugin scorer that raises or returns something else leaves the
attempt unscored (reward None) with the reason, never a 0.
"""

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import regex
from pydantic import BaseModel, ValidationError

from envloop.plugins import Catalog, ComponentError, Found, ShapeError, instantiate
from envloop.plugins.errors import one_line
from envloop.tasks.jsonl import parse_numeric
from envloop.tasks.model import ChatRow, TaskFormatError

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


Scorer = Callable[[str, str], ScoreResult]


def _builtins() -> dict[str, Scorer]:
    return {"exact": score_exact, "includes": score_includes, "regex": score_regex, "numeric": score_numeric}


def adopt_scorer(loaded: object) -> Scorer:
    scorer = instantiate(loaded)
    if not callable(scorer):
        raise ShapeError("it is not a callable (answer, expected) -> ScoreResult")
    return scorer  # called through _plugin_score, which checks what it returns


SCORER_CATALOG: Catalog[Scorer] = Catalog("scorer", "envloop.scorers", _builtins, adopt_scorer)


def find_scorer(name: str) -> Found[Scorer]:
    """The scorer a dataset names; ComponentError saying why there is none."""
    return SCORER_CATALOG.find(name)


def score(scorer: str, answer: str, expected: str) -> ScoreResult:
    """Score with the named scorer; ValueError for an unknown scorer or an unusable expected answer
    of a built-in (push-time validation refuses both, so this only happens to hand-built data)."""
    found = find_scorer(scorer)
    if found.origin.source == "built-in":
        return found.component(answer, expected)
    return _plugin_score(found, answer, expected)


def _plugin_score(found: Found[Scorer], answer: str, expected: str) -> ScoreResult:
    try:
        result: object = found.component(answer, expected)
    except Exception as exc:  # a plugin's failure leaves the attempt unscored, with why
        return ScoreResult(reward=None, explanation=f"scorer {found.name} failed: {one_line(exc)}")
    if isinstance(result, ScoreResult):
        return result
    try:
        return ScoreResult.model_validate(result, from_attributes=True)
    except ValidationError:
        shown = one_line(TypeError(repr(result)[:80]))
        return ScoreResult(reward=None, explanation=f"scorer {found.name} returned no ScoreResult ({shown})")


def validate_scorer(name: str, rows: Sequence[ChatRow], *, source: Path | str = "rows") -> str:
    """Check that `name` is an installed scorer and that every row's answer suits a built-in one;
    returns the name.

    `includes` and `regex` refuse an empty answer, which would match every response and score a
    dataset as solved by any model.
    """
    try:
        find_scorer(name)
    except ComponentError as exc:
        raise TaskFormatError(source, str(exc), field="scorer") from None
    for row in rows:
        problem = _answer_problem(name, row.answer)
        if problem is not None:
            raise TaskFormatError(f"{source}: row {row.id}", f"{problem} (scorer {name!r})", field="answer")
    return name


def _answer_problem(name: str, answer: str) -> str | None:
    if name in ("includes", "regex") and not answer:
        return "must not be empty: it would match every response"
    if name == "regex":
        try:
            regex.compile(answer)
        except regex.error as exc:
            return f"is not a valid regular expression ({exc})"
    if name == "numeric" and parse_numeric(answer) is None:
        return f"{answer!r} is not a finite number"
    return None
