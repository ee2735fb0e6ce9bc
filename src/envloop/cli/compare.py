"""`el job compare` (is B better than A, by how much, how sure) and `el plan` (how much to run)."""

from typing import Annotated

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from envloop.cli.backend import operations
from envloop.cli.output import emit_json, out, table, warn
from envloop.core.display import format_score
from envloop.wire import Comparison

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]


def compare(
    job_a: Annotated[str, typer.Argument(help="Job A, the reference (before).")],
    job_b: Annotated[
        str | None, typer.Argument(help="Job B (after); omit to compare two profiles of job A.")
    ] = None,
    profile_a: Annotated[
        str | None, typer.Option("--profile-a", help="A's profile, when its job ran several.")
    ] = None,
    profile_b: Annotated[
        str | None, typer.Option("--profile-b", help="B's profile, when its job ran several.")
    ] = None,
    json_: JsonOpt = False,
) -> None:
    """Paired comparison B - A on the tasks both scored: difference, s.e., 95% CI, correlation."""
    result = operations().compare_runs(job_a, job_b, profile_a, profile_b)
    for message in result.warnings:
        warn(message)
    if json_:
        emit_json(result)
        return
    out.print(comparison_view(result))


def _interval(ci95: tuple[float, float] | None) -> str:
    return f" (95% CI {format_score(ci95[0])} – {format_score(ci95[1])})" if ci95 else ""


def _rates(result: Comparison) -> bool:
    """Whether per-task values are rates in [0, 1], so differences read as percentage points."""
    return all(0.0 <= t.a <= 1.0 and 0.0 <= t.b <= 1.0 for t in result.tasks)


def _signed(value: float | None, points: bool) -> str:
    if value is None:
        return "—"
    return f"{value * 100:+.1f} pts" if points else f"{value:+.4g}"


def comparison_view(result: Comparison) -> Group:
    points = _rates(result)
    lines: list[Text | Table] = []
    for label, side in (("A", result.a), ("B", result.b)):
        lines.append(Text(f"{label}  {side.job_id}  {side.profile}  model {side.model}", style="bold"))
        lines.append(Text(f"   {side.coverage}{_interval(side.ci95)}"))
    if result.difference is None:
        lines.append(Text("B - A  —  (no task was scored by both runs)"))
    else:
        ci = result.ci95
        detail = []
        if result.stderr is not None:
            detail.append(f"s.e. {_signed(result.stderr, points).lstrip('+')}")
        if ci is not None:
            cut = ", cut at the possible range" if result.ci95_clamped else ""
            detail.append(f"95% CI {_signed(ci[0], points)} to {_signed(ci[1], points)}{cut}")
        if result.p_value is not None:
            detail.append(f"p = {result.p_value:.3g}")
        correlation = "—" if result.correlation is None else f"{result.correlation:.2f}"
        lines.append(
            Text(
                f"B - A  {_signed(result.difference, points)}"
                + (f"  ({', '.join(detail)})" if detail else "")
                + f"  on {result.n_tasks} tasks both scored; correlation {correlation}"
            )
        )
    if result.excluded:
        shown = ", ".join(f"{e.task} ({e.reason})" for e in result.excluded[:5])
        more = f", and {len(result.excluded) - 5} more" if len(result.excluded) > 5 else ""
        lines.append(
            Text(
                f"excluded: {result.only_a} only A scored, {result.only_b} only B scored, "
                f"{result.changed} changed content: {shown}{more}"
            )
        )
    if result.dimensions:
        lines.append(
            table(
                ["dimension", "B - A", "95% CI", "tasks", "note"],
                [
                    [
                        d.name,
                        None if d.difference is None else f"{d.difference:+.4g}",
                        None
                        if d.ci95 is None
                        else f"{d.ci95[0]:+.4g} to {d.ci95[1]:+.4g}" + (" (cut)" if d.ci95_clamped else ""),
                        d.n_tasks,
                        d.refused or (d.definition.describe() if d.definition else None),
                    ]
                    for d in result.dimensions
                ],
            )
        )
    return Group(*lines)


def plan(
    baseline: Annotated[str, typer.Option("--baseline", help="The job whose variance to plan from.")],
    effect: Annotated[
        float, typer.Option("--effect", help="Difference to detect, in reward units (0.03 = 3 points).")
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
    within = "unknown (one attempt per task)" if variance.within is None else f"{variance.within:.4g}"
    lines: list[Text | Table] = [
        Text(f"baseline {base.job_id} {base.profile}: {base.coverage}{_interval(base.ci95)}"),
        Text(f"variance between tasks {variance.between:.4g}, within a task {within}"),
        Text(
            f"to detect {result.effect:g} (two-sided alpha {result.alpha:g}, power {result.power:.0%}, "
            f"correlation {result.correlation:g}):"
        ),
        table(
            [
                "attempts",
                "tasks needed",
                "attempts per run",
                f"fits the dataset ({result.dataset_tasks} tasks)",
            ],
            [
                [o.attempts, o.tasks, o.total_attempts, "yes" if o.fits_dataset else "no"]
                for o in result.options
            ],
        ),
        Text(
            f"with all {result.dataset_tasks} tasks: "
            + (
                f"{result.attempts_with_all_tasks} attempts per task"
                if result.attempts_with_all_tasks is not None
                else "no number of attempts is enough; it needs more tasks"
            )
        ),
        Text(f"the baseline's own design detects differences of {result.detectable_effect:.3g} or more"),
    ]
    lines += [Text(f"note: {n}") for n in result.notes]
    out.print(Group(*lines))
