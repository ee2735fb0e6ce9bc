"""`el plan`: the tasks and attempts a comparison needs to detect an effect, from a baseline job's
variance (`el job compare` then tells whether it did)."""

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from envloop.cli.backend import operations
from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, out, table
from envloop.cli.render import interval_note
from envloop.core.display import DifferenceUnit, format_difference
from envloop.core.words import plural

if TYPE_CHECKING:
    from envloop.wire import Plan


def plan_unit(result: "Plan") -> DifferenceUnit:
    """A plan speaks in the unit a comparison would: points when the baseline's rewards are rates
    (its score and interval lie in [0, 1]) and the effect is one, the reward's own scale otherwise."""
    bounds = [result.effect, *([result.baseline.score] if result.baseline.score is not None else [])]
    bounds += list(result.baseline.ci95 or ())
    return "points" if all(0.0 <= x <= 1.0 for x in bounds) else "reward"


def plan(
    baseline: Annotated[str, typer.Option("--baseline", help="The job whose variance to plan from.")],
    effect: Annotated[
        float,
        typer.Option("--effect", help="Difference to detect, in reward units (0.03 = 3 points)."),
    ],
    profile: Annotated[
        str | None, typer.Option("--profile", help="The baseline's profile, when the job ran several.")
    ] = None,
    power: Annotated[float, typer.Option("--power", help="Chance of detecting a real effect.")] = 0.8,
    alpha: Annotated[float, typer.Option("--alpha", help="Two-sided significance level.")] = 0.05,
    correlation: Annotated[
        float,
        typer.Option("--correlation", help="Expected correlation of the two runs' task scores (pairing)."),
    ] = 0.0,
    json_: JsonOpt = False,
) -> None:
    """Tasks and attempts a comparison needs to detect EFFECT, from a baseline job's variance."""
    result = operations().plan_comparison(baseline, effect, profile, power, alpha, correlation)
    if json_:
        emit_json(result)
        return
    variance, base = result.variance, result.baseline
    unit = plan_unit(result)
    detectable = f"{format_difference(result.detectable_effect, unit, sign=False)} or more"
    if unit == "points" and result.detectable_effect > 1:
        detectable += " (more than two rates can differ: it has too few tasks or attempts)"
    within = "unknown (one attempt per task)" if variance.within is None else f"{variance.within:.4g}"
    lines: list[Text | Table] = [
        Text(f"baseline {base.job_id} {base.profile}: {base.coverage}{interval_note(base.ci95)}"),
        Text(f"variance between tasks {variance.between:.4g}, within a task {within}"),
        Text(
            f"to detect {format_difference(result.effect, unit, sign=False)} (two-sided alpha "
            f"{result.alpha:g}, power {result.power:.0%}, correlation {result.correlation:g}):"
        ),
        table(
            [
                "attempts",
                "tasks needed",
                "attempts per run",
                f"fits the dataset ({plural(result.dataset_tasks, 'task')})",
            ],
            [
                [o.attempts, o.tasks, o.total_attempts, "yes" if o.fits_dataset else "no"]
                for o in result.options
            ],
        ),
        Text(
            f"with all {plural(result.dataset_tasks, 'task')}: "
            + (
                f"{plural(result.attempts_with_all_tasks, 'attempt')} per task"
                if result.attempts_with_all_tasks is not None
                else "no number of attempts is enough; it needs more tasks"
            )
        ),
        Text(f"the baseline's own design detects differences of {detectable}"),
    ]
    lines += [Text(f"note: {n}") for n in result.notes]
    out.print(Group(*lines))
