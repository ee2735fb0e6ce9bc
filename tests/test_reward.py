"""The reward grammar (docs, "Reward files"): what a verifier may write, and what happens to
anything else. A file that breaks the grammar is rejected with the reason (the runner makes the
trial a verifier_error); it never becomes a number nobody wrote."""

import json
import math

import pytest

from envloop.core.reward import MAX_DIMENSIONS, REWARD_MAX, parse_reward


@pytest.mark.parametrize(
    ("text", "reward"),
    [("1", 1.0), ("0\n", 0.0), (" 0.25 ", 0.25), (".5", 0.5), ("2.5e-1", 0.25), ("+1", 1.0), ("-0", 0.0)],
)
def test_plain_decimal_numbers_are_rewards(text: str, reward: float) -> None:
    reading = parse_reward(text, None)
    assert (reading.reward, reading.rejected) == (reward, None)
    assert math.copysign(1.0, reading.reward or 0.0) == 1.0


@pytest.mark.parametrize("text", ["1_0", "0x1", "nan", "inf", "-inf", "Infinity", "1 point", "", "1e", "٣"])
def test_what_python_would_read_as_a_number_but_the_grammar_does_not_is_rejected(text: str) -> None:
    """float('1_0') is 10.0 and float('٣') is 3.0; neither is a reward a verifier wrote on purpose."""
    reading = parse_reward(text, None)
    assert reading.reward is None
    assert reading.rejected is not None and "reward.txt is not a decimal number" in reading.rejected
    assert reading.note == reading.rejected


@pytest.mark.parametrize("text", ["-0.5", "-1", "1e308", "1000000.5", "1e7"])
def test_rewards_outside_the_documented_range_are_rejected_with_the_range(text: str) -> None:
    reading = parse_reward(text, None)
    assert reading.reward is None
    assert reading.rejected is not None and "outside the accepted range 0 to 1,000,000" in reading.rejected


def test_the_range_ends_are_accepted() -> None:
    assert parse_reward("0", None).reward == 0.0
    assert parse_reward(f"{REWARD_MAX:.0f}", None).reward == REWARD_MAX


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ('{"reward": 1e400}', "outside the accepted range"),
        ('{"reward": NaN}', "outside the accepted range"),
        ('{"reward": -1}', "outside the accepted range 0 to 1,000,000"),
        ('{"reward": 1, "speed": 1e9}', "'speed' is outside the accepted range"),
        ('{"reward": 1, "note": "fine"}', "'note' is not a number"),
        ('{"reward": true}', "'reward' is not a number"),
        ('{"reward": ' + "1" * 5000 + "}", "not valid JSON"),
        ("[" * 200_000 + "]" * 200_000, "nested too deeply"),
        ('{"reward": {"value": 1}}', "'reward' is not a number"),
        ("[1]", "not a JSON object"),
        ("{", "not valid JSON"),
    ],
)
def test_a_reward_json_that_breaks_the_grammar_is_rejected_whole(document: str, reason: str) -> None:
    reading = parse_reward(None, document)
    assert (reading.reward, reading.dimensions) == (None, {})
    assert reading.rejected is not None and reason in reading.rejected


def test_a_reward_json_of_more_keys_than_the_cap_is_rejected_not_stored() -> None:
    document = json.dumps({f"d{i}": 0.5 for i in range(60_001)})
    reading = parse_reward(None, document)
    assert reading.dimensions == {}
    assert reading.rejected == f"reward.json has 60001 keys; at most {MAX_DIMENSIONS} are accepted"
    fits = parse_reward(None, json.dumps({f"d{i}": 0.5 for i in range(MAX_DIMENSIONS)}))
    assert len(fits.dimensions) == MAX_DIMENSIONS and fits.rejected is None


def test_a_valid_reward_json_keeps_its_rule_and_its_dimensions() -> None:
    assert parse_reward(None, '{"reward": 0.5, "speed": -3}').dimensions == {"reward": 0.5, "speed": -3.0}
    assert parse_reward(None, '{"accuracy": 0.75}').reward == 0.75
    several = parse_reward(None, '{"accuracy": 0.5, "speed": 2}')
    assert several.reward is None and several.rejected is None
    assert several.note is not None and "no 'reward' key" in several.note
    assert parse_reward("1", '{"reward": 0}').reward == 1.0


def test_no_file_is_unscored_not_rejected() -> None:
    reading = parse_reward(None, None)
    assert (reading.reward, reading.rejected) == (None, None)
    assert reading.note == "the verifier wrote neither reward.txt nor reward.json"
