"""Specification of the job metrics of SPEC section 3 (envloop.core.metrics.compute_metrics).

The shared test vectors are read from the file every run, so the product contract and this module
cannot drift apart.
"""

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from envloop.core.metrics import (
    AttemptSlot,
    ProfileMetrics,
    compare_profiles,
    compute_metrics,
    null_reasons,
)
from envloop.core.stats import estimator_curves

VECTORS_PATH = Path(__file__).resolve().parents[2] / "shared" / "testdata" / "metrics_vectors.json"


def load_vectors() -> dict[str, Any]:
    if not VECTORS_PATH.is_file():
        raise FileNotFoundError(f"metrics test vectors are required and missing: {VECTORS_PATH}")
    data: dict[str, Any] = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))
    return data


VECTORS = load_vectors()
JOB_CASES = {case["name"]: case for case in VECTORS["job_metrics"]}
ESTIMATOR_CASES = VECTORS["estimator_curves"]["cases"]


def slots_from_encoding(tasks: Mapping[str, Sequence[Any]]) -> list[AttemptSlot]:
    """The vector file's slot encoding: number, null, "invalid", {"invalidated": x}, "undispatched"."""
    slots = []
    for task, encoded in tasks.items():
        for attempt, value in enumerate(encoded, start=1):
            if isinstance(value, int | float) and not isinstance(value, bool):
                slot = AttemptSlot(task=task, attempt=attempt, state="scored", reward=value)
            elif value is None:
                slot = AttemptSlot(task=task, attempt=attempt, state="waiting")
            elif value == "invalid":
                slot = AttemptSlot(task=task, attempt=attempt, state="invalid")
            elif isinstance(value, dict) and set(value) == {"invalidated"}:
                slot = AttemptSlot(
                    task=task, attempt=attempt, state="invalidated", reward=value["invalidated"]
                )
            elif value == "undispatched":
                slot = AttemptSlot(task=task, attempt=attempt, state="undispatched")
            else:
                raise ValueError(f"unknown slot encoding {value!r}")
            slots.append(slot)
    return slots


def metrics_for(k: int, tasks: Mapping[str, Sequence[Any]]) -> ProfileMetrics:
    return compute_metrics(list(tasks), k, slots_from_encoding(tasks))


def assert_matches(actual: Any, expected: Any, where: str) -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict), where
        for key, value in expected.items():
            assert key in actual, f"{where}.{key} missing"
            assert_matches(actual[key], value, f"{where}.{key}")
    elif isinstance(expected, float) and not isinstance(expected, bool):
        assert actual is not None, where
        assert math.isclose(actual, expected, rel_tol=1e-9), (where, actual, expected)
    else:
        assert actual == expected, (where, actual, expected)


@pytest.mark.parametrize("name", sorted(JOB_CASES))
def test_every_shared_vector_gives_its_expected_metrics(name: str) -> None:
    case = JOB_CASES[name]
    metrics = metrics_for(case["k"], case["tasks"])
    dumped = json.loads(metrics.model_dump_json(by_alias=True))
    assert_matches(dumped, case["expected"], name)


@pytest.mark.parametrize("case", ESTIMATOR_CASES, ids=lambda case: f"n{case['n']}_c{case['c']}")
def test_every_shared_estimator_curve_matches_the_per_task_estimator(case: dict[str, Any]) -> None:
    pass_at, pass_hat = estimator_curves(case["n"], case["c"])
    assert len(pass_at) == case["n"]
    for k, expected in case["pass_at"].items():
        assert math.isclose(pass_at[int(k) - 1], expected, rel_tol=1e-9, abs_tol=1e-15)
    for k, expected in case["pass_hat"].items():
        assert math.isclose(pass_hat[int(k) - 1], expected, rel_tol=1e-9, abs_tol=1e-15)


def test_vectors_cover_every_slot_state() -> None:
    states = {slot.state for case in JOB_CASES.values() for slot in slots_from_encoding(case["tasks"])}
    assert states == {"scored", "waiting", "invalid", "invalidated", "undispatched"}


def test_missing_reward_is_never_counted_as_zero() -> None:
    """C's missing attempt would drag the score to 0.5 and pass^2 to 1/3 if it were read as 0."""
    metrics = metrics_for(2, {"A": [1, 0], "B": [1, 1], "C": [0, None]})
    assert metrics.score == pytest.approx(0.6)
    assert metrics.pass_hat_k == pytest.approx(0.5)
    assert metrics.members[2].attempts == [0.0, "waiting"]
    assert metrics.members[2].mean == 0.0
    assert metrics.members[2].complete is False


def test_slots_never_reported_are_undispatched() -> None:
    metrics = compute_metrics(["A", "B"], 3, [AttemptSlot(task="A", attempt=2, state="scored", reward=1.0)])
    assert metrics.members[0].attempts == ["undispatched", 1.0, "undispatched"]
    assert metrics.members[1].attempts == ["undispatched"] * 3
    counts = metrics.score_counts
    assert (counts.total, counts.scored, counts.missing, counts.complete_members) == (6, 1, 5, 0)
    assert metrics.pass_at_k is None
    assert metrics.pass_hat_k is None


def test_mixed_states_count_once_each_in_coverage() -> None:
    metrics = metrics_for(
        4,
        {
            "A": [1, None, "invalid", {"invalidated": 0}],
            "B": ["undispatched", 0, "invalid", 1],
            "C": [1, 1, 1, 1],
        },
    )
    counts = metrics.score_counts
    assert counts.total == 12
    assert counts.scored == 7
    assert counts.missing == 5
    assert counts.invalid == 2
    assert counts.invalidated == 1
    assert counts.scored + counts.missing == counts.total
    assert (counts.total_members, counts.complete_members) == (3, 1)
    assert metrics.score == pytest.approx(6 / 7)
    assert metrics.pass_at_k == 1.0
    assert metrics.pass_hat_k == 1.0


def test_per_member_table_lists_every_member_in_dataset_order() -> None:
    metrics = metrics_for(3, {"zeta": [1, 0, "invalid"], "alpha": [0.5, 1, 0], "mid": [1, 1, 1]})
    rows = [row.model_dump() for row in metrics.members]
    assert rows == [
        {
            "task": "zeta",
            "attempts": [1.0, 0.0, "invalid"],
            "scored": 2,
            "mean": 0.5,
            "passes": 1,
            "complete": False,
        },
        {
            "task": "alpha",
            "attempts": [0.5, 1.0, 0.0],
            "scored": 3,
            "mean": 0.5,
            "passes": None,
            "complete": True,
        },
        {"task": "mid", "attempts": [1.0, 1.0, 1.0], "scored": 3, "mean": 1.0, "passes": 3, "complete": True},
    ]


def test_invalidated_reward_is_shown_as_invalidated_and_never_counts() -> None:
    metrics = metrics_for(2, {"A": [0, {"invalidated": 1}], "B": [0, 0]})
    assert metrics.members[0].attempts == [0.0, "invalidated"]
    assert metrics.score == 0.0
    assert metrics.pass_at_k == 0.0


def test_json_uses_the_contract_keys_with_pass_spelled_pass() -> None:
    metrics = metrics_for(2, {"A": [1, 0], "B": [1, 1], "C": [0, None]})
    dumped = json.loads(metrics.model_dump_json(by_alias=True))
    assert set(dumped) == {
        "k",
        "score",
        "pass",
        "pass_at_k",
        "pass_hat_k",
        "score_counts",
        "curve",
        "stderr",
        "ci95",
        "members",
    }
    assert dumped["pass"] == pytest.approx(0.6)
    assert metrics.model_dump(by_alias=True)["pass"] == pytest.approx(0.6)
    assert set(dumped["curve"][0]) == {"k", "pass_at_k", "pass_hat_k", "tasks"}
    assert set(dumped["members"][0]) == {"task", "attempts", "scored", "mean", "passes", "complete"}
    assert isinstance(dumped["ci95"], list)
    assert ProfileMetrics.model_validate(dumped) == metrics


def test_curve_weights_tasks_equally_over_those_with_enough_scored_attempts() -> None:
    """A has n=3, c=1; B has a single scored pass. k'=1 averages both; k'>=2 only A."""
    metrics = metrics_for(3, {"A": [1, 0, 0], "B": [1, None, "invalid"]})
    assert metrics.curve is not None
    points = [(p.k, p.pass_at_k, p.pass_hat_k, p.tasks) for p in metrics.curve]
    assert points == [
        (1, pytest.approx((1 / 3 + 1) / 2), pytest.approx((1 / 3 + 1) / 2), 2),
        (2, pytest.approx(2 / 3), 0.0, 1),
        (3, 1.0, 0.0, 1),
    ]


def test_curve_at_the_requested_k_agrees_with_pass_at_k_when_every_member_is_complete() -> None:
    metrics = metrics_for(3, {"A": [1, 0, 0], "B": [1, 1, 1], "C": [0, 0, 0], "D": [0, 1, 1]})
    assert metrics.curve is not None
    assert metrics.curve[-1].pass_at_k == pytest.approx(metrics.pass_at_k)
    assert metrics.curve[-1].pass_hat_k == pytest.approx(metrics.pass_hat_k)
    assert metrics.curve[0].pass_at_k == pytest.approx(metrics.score)


def test_curve_is_null_when_rewards_are_not_binary_or_nothing_is_scored() -> None:
    assert metrics_for(2, {"A": [1, 0.5]}).curve is None
    assert metrics_for(2, {"A": [None, "invalid"]}).curve is None


def test_stderr_is_clustered_by_task_and_the_interval_uses_student_t() -> None:
    """Seed example: residual sums per task -0.2, 0.8, -0.6; Var = 3/2 * 1.04 / 25 (Miller 2024)."""
    metrics = metrics_for(2, {"A": [1, 0], "B": [1, 1], "C": [0, None]})
    assert metrics.stderr == pytest.approx(math.sqrt(1.5 * 1.04 / 25), rel=1e-12)
    assert metrics.ci95 == (0.0, 1.0)


def test_partial_credit_interval_stays_within_the_unit_range() -> None:
    metrics = metrics_for(2, {"A": [0.5, 1.0], "B": [0.25, 0.0]})
    assert metrics.stderr == pytest.approx(0.3125, rel=1e-12)
    assert metrics.ci95 == (0.0, 1.0)


def test_rewards_outside_the_unit_range_keep_their_scale_in_the_interval() -> None:
    metrics = metrics_for(2, {"A": [5.0, 10.0], "B": [2.5, 0.0]})
    assert metrics.stderr == pytest.approx(3.125, rel=1e-12)
    assert metrics.ci95 is not None
    half = 12.706204736174698 * 3.125
    assert metrics.ci95[0] == pytest.approx(4.375 - half, rel=1e-9)
    assert metrics.ci95[1] == pytest.approx(4.375 + half, rel=1e-9)


def test_one_scored_task_has_no_error_bar() -> None:
    metrics = metrics_for(3, {"A": [1, 0, 1], "B": [None, None, None]})
    assert metrics.score == pytest.approx(2 / 3)
    assert metrics.stderr is None
    assert metrics.ci95 is None


def test_a_huge_attempt_count_gives_an_accurate_curve() -> None:
    rewards: list[Any] = [1] * 1000 + [0] * 1000
    metrics = metrics_for(2000, {"A": rewards})
    assert metrics.curve is not None
    point = metrics.curve[999]
    assert point.pass_at_k == 1.0
    assert metrics.curve[1].pass_hat_k == pytest.approx(1000 * 999 / (2000 * 1999), rel=1e-12)


def test_slots_outside_the_requested_grid_are_a_programming_error() -> None:
    with pytest.raises(ValueError, match="not a selected member"):
        compute_metrics(["A"], 2, [AttemptSlot(task="B", attempt=1, state="waiting")])
    with pytest.raises(ValueError, match=r"outside 1\.\.k=2"):
        compute_metrics(["A"], 2, [AttemptSlot(task="A", attempt=3, state="waiting")])
    with pytest.raises(ValueError, match="two slots"):
        compute_metrics(["A"], 2, [AttemptSlot(task="A", attempt=1, state="waiting")] * 2)
    with pytest.raises(ValueError, match="distinct"):
        compute_metrics(["A", "A"], 2, [])
    with pytest.raises(ValueError, match="at least 1"):
        compute_metrics(["A"], 0, [])


def test_a_reward_that_contradicts_its_state_is_refused() -> None:
    with pytest.raises(ValueError, match="has no finite reward"):
        compute_metrics(["A"], 1, [AttemptSlot(task="A", attempt=1, state="scored")])
    with pytest.raises(ValueError, match="cannot carry a reward"):
        compute_metrics(["A"], 1, [AttemptSlot(task="A", attempt=1, state="waiting", reward=1.0)])
    with pytest.raises(ValueError, match="has no finite reward"):
        compute_metrics(["A"], 1, [AttemptSlot(task="A", attempt=1, state="scored", reward=math.nan)])
    with pytest.raises(ValueError, match=r"outside 1\.\.k=1"):
        compute_metrics(["A"], 1, [AttemptSlot(task="A", attempt=0, state="waiting")])


def test_null_aggregates_come_with_a_reason() -> None:
    assert null_reasons(metrics_for(2, {"A": [1, 0], "B": [0, 1]})) == {}
    nothing = null_reasons(metrics_for(1, {"A": [None]}))
    assert nothing["score"] == "no attempt has a counted reward"
    non_binary = null_reasons(metrics_for(1, {"A": [0.5], "B": [1]}))
    assert set(non_binary) == {"pass", "pass_at_k", "pass_hat_k", "curve"}
    incomplete = null_reasons(metrics_for(2, {"A": [1, None], "B": [0, "invalid"]}))
    assert incomplete["pass_at_k"] == "no member has all 2 attempts scored"


def test_profiles_compare_task_by_task_over_tasks_both_scored() -> None:
    a = metrics_for(2, {"A": [1, 1], "B": [1, 0], "C": [0, 0], "D": [None, None]})
    b = metrics_for(2, {"A": [1, 0], "B": [0, 0], "C": [0, 0], "D": [1, 1]})
    comparison = compare_profiles(a, b)
    assert comparison.tasks == 3
    assert comparison.mean_difference == pytest.approx((0.5 + 0.5 + 0.0) / 3)
    assert comparison.stderr is not None
    assert comparison.correlation is not None
