"""The built-in JSONL scorers: 1.0 or 0.0 with a sentence saying why."""

import pytest

from envloop.tasks.jsonl import SCORERS
from envloop.tasks.scorers import score


@pytest.mark.parametrize(
    ("scorer", "answer", "expected", "reward"),
    [
        ("exact", "4", "4", 1.0),
        ("exact", "  4\n", "4", 1.0),
        ("exact", "4", " 4 ", 1.0),
        ("exact", "4.", "4", 0.0),
        ("exact", "paris", "Paris", 0.0),
        ("includes", "The capital is Paris.", "Paris", 1.0),
        ("includes", "The capital is paris.", "Paris", 0.0),
        ("regex", "answer: 42 apples", r"\b42\b", 1.0),
        ("regex", "answer: 420", r"\b42\b", 0.0),
        ("regex", "PARIS", r"(?i)^paris$", 1.0),
        ("numeric", "42", "42", 1.0),
        ("numeric", " $1,234.50 ", "1234.5", 1.0),
        ("numeric", "0.30000000000000004", "0.3", 1.0),
        ("numeric", "42.1", "42", 0.0),
        ("numeric", "forty-two", "42", 0.0),
        ("numeric", "nan", "42", 0.0),
    ],
)
def test_each_scorer_gives_one_or_zero(scorer: str, answer: str, expected: str, reward: float) -> None:
    assert score(scorer, answer, expected).reward == reward


def test_exact_compares_after_trimming_surrounding_whitespace_only() -> None:
    assert score("exact", "\n\t Paris \n", "Paris").passed
    assert not score("exact", "Par is", "Paris").passed


def test_every_push_time_scorer_has_an_implementation() -> None:
    for name in SCORERS:
        assert score(name, "1", "1").reward == 1.0


def test_explanations_say_why() -> None:
    assert score("exact", "5", "4").explanation == "the trimmed answer '5' differs from '4'"
    assert score("numeric", "about 4", "4").explanation == "the answer 'about 4' is not a number (expected 4)"
    assert score("regex", "x 42 y", r"\d+").explanation == "/\\d+/ matches '42'"


def test_long_answers_are_quoted_short_in_explanations() -> None:
    explanation = score("exact", "x" * 1000, "y").explanation
    assert len(explanation) < 200


def test_unknown_scorer_and_unusable_expected_answers_are_value_errors() -> None:
    with pytest.raises(ValueError, match="unknown scorer 'fuzzy'"):
        score("fuzzy", "a", "a")
    with pytest.raises(ValueError, match="not a number"):
        score("numeric", "1", "one")
    with pytest.raises(ValueError, match="not a valid regular expression"):
        score("regex", "a", "(")


def test_a_regex_that_backtracks_catastrophically_is_stopped_without_a_reward() -> None:
    result = score("regex", "a" * 60 + "b", "(a|aa)+$")
    assert result.reward is None and not result.passed
    assert "did not finish within 1 s" in result.explanation


def test_regex_syntax_is_pythons() -> None:
    assert score("regex", "Paris, France", r"(?i)\bparis\b").reward == 1.0
    assert score("regex", "x = 12", r"(?P<n>\d+)$").reward == 1.0
