"""Specification of how scores and their coverage read (SPEC section 3, Display)."""

import pytest

from envloop.cli.render import structured_lines
from envloop.core.display import coverage_line, format_score
from envloop.core.metrics import AttemptSlot, compute_metrics
from envloop.core.structured import Aggregate, Definition, DimensionSummary, StructuredSummary


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.75, "75%"),
        (0.6, "60%"),
        (0.6667, "66.7%"),
        (2 / 3, "66.7%"),
        (1, "100%"),
        (1.0, "100%"),
        (0, "0%"),
        (0.001, "0.1%"),
        (3.5, "3.5"),
        (12.0, "12"),
        (-0.25, "-0.25"),
        (-2.0, "-2"),
        (1234.5678, "1234.568"),
        (-0.00001, "-1e-05"),
        (None, "—"),
    ],
)
def test_rates_show_as_percentages_and_other_values_keep_their_scale(value: float | None, shown: str) -> None:
    assert format_score(value) == shown


def test_rounding_never_shows_a_partial_rate_as_all_or_nothing() -> None:
    assert format_score(0.99996) == ">99.9%"
    assert format_score(0.0004) == "<0.1%"


def test_coverage_line_for_the_seed_example() -> None:
    rewards = {"A": [1.0, 0.0], "B": [1.0, 1.0], "C": [0.0]}
    slots = [
        AttemptSlot(task=task, attempt=attempt, state="scored", reward=reward)
        for task, values in rewards.items()
        for attempt, reward in enumerate(values, start=1)
    ]
    slots.append(AttemptSlot(task="C", attempt=2, state="waiting"))
    metrics = compute_metrics(["A", "B", "C"], 2, slots)
    assert coverage_line(metrics) == "score 60%, 5/6 attempts scored, 2/3 members complete"


def test_coverage_line_when_nothing_is_scored() -> None:
    slots = [
        AttemptSlot(task="A", attempt=1, state="invalid"),
        AttemptSlot(task="B", attempt=2, state="waiting"),
    ]
    metrics = compute_metrics(["A", "B"], 2, slots)
    assert coverage_line(metrics) == "score —, 0/4 attempts scored, 0/2 members complete"


def test_structured_aggregates_print_on_their_own_scale_with_the_interval() -> None:
    summary = StructuredSummary(
        trials=4,
        invalid=1,
        composite=Aggregate(mean=0.5, stderr=0.1, ci95=(0.25, 0.75), trials=4, tasks=2),
        dimensions={
            "latency_s": DimensionSummary(
                definition=Definition(scale=(0.0, None), direction="lower", verifier_version=None),
                aggregate=Aggregate(mean=12.5, stderr=1.0, ci95=(10.0, 15.0), trials=4, tasks=2),
                trials=4,
            ),
            "style": DimensionSummary(definition=None, aggregate=None, trials=4, conflict="scales differ"),
        },
    )
    assert [line.plain for line in structured_lines(summary)] == [
        "structured results: 4 trials, 1 invalid (kept raw in their artifacts)",
        "  composite  0.5 (95% CI 0.25 – 0.75) over 4 trials, 2 tasks",
        "  latency_s  12.5 (95% CI 10 – 15) over 4 trials, 2 tasks   [0, open] lower is better",
        "  style  not aggregated: scales differ",
    ]
