"""`el job compare`: is B better than A, by how much, how sure (`el plan`: how much to run to tell)."""

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from envloop.cli.backend import operations
from envloop.cli.compare_tasks import candidates_table, task_table, unchanged_note
from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, out, table, warn
from envloop.cli.render import interval_note
from envloop.core.display import format_difference, format_difference_interval
from envloop.core.words import plural

if TYPE_CHECKING:
    from envloop.wire import Comparison


def compare(
    jobs: Annotated[
        list[str],
        typer.Argument(
            help="Job A, the reference (before), then job B (after); more jobs compare each against A. "
            "One job alone compares two of its profiles.",
            show_default=False,
            metavar="JOB",
        ),
    ],
    profile_a: Annotated[
        str | None, typer.Option("--profile-a", help="A's profile, when its job ran several.")
    ] = None,
    profile_b: Annotated[
        str | None,
        typer.Option("--profile-b", help="B's profile (each candidate's), when its job ran several."),
    ] = None,
    every_task: Annotated[
        bool, typer.Option("--all", help="List the unchanged tasks too, not only those that moved.")
    ] = False,
    json_: JsonOpt = False,
) -> None:
    """Paired comparison B - A on the tasks both scored: difference, s.e., 95% CI, correlation, and
    the tasks that moved with each side's attempts and why each did not pass."""
    baseline, *candidates = jobs
    others: list[str | None] = [*candidates] or [None]  # one job alone: two of its profiles
    results = [operations().compare_runs(baseline, job, profile_a, profile_b) for job in others]
    for result in results:
        for message in result.warnings:
            warn(message)
    if json_:
        emit_json(results[0] if len(results) == 1 else results)
        return
    view = (
        comparison_view(results[0], every_task=every_task)
        if len(results) == 1
        else candidates_view(results, every_task=every_task)
    )
    out.print(view, soft_wrap=False)  # long lines wrap between words in a terminal


def tally(result: "Comparison") -> str:
    """`3 improved · 1 regressed · 1 unchanged`: how the tasks both runs scored moved, B against A."""
    return f"{result.improved} improved · {result.regressed} regressed · {result.unchanged} unchanged"


def difference_line(result: "Comparison") -> str:
    """B - A with its s.e., interval and p-value (one paired t test), in the comparison's unit."""
    unit = result.unit
    if result.difference is None:
        return "B - A  —  (no task was scored by both runs)"
    detail = []
    if result.stderr is not None:
        detail.append(f"s.e. {format_difference(result.stderr, unit, sign=False)}")
    if result.ci95 is not None:
        cut = ", cut at the possible range" if result.ci95_clamped else ""
        detail.append(f"95% CI {format_difference_interval(result.ci95, unit)}{cut}")
    if result.p_value is not None:
        detail.append(f"p = {result.p_value:.3g}")
    if result.no_interval is not None:
        detail.append(f"no interval: {result.no_interval}")
    correlation = "—" if result.correlation is None else f"{result.correlation:.2f}"
    return (
        f"B - A  {format_difference(result.difference, unit)}"
        + (f"  ({', '.join(detail)})" if detail else "")
        + f"  on {plural(result.n_tasks, 'task')} both scored; correlation {correlation}"
    )


def comparison_view(result: "Comparison", *, every_task: bool = False) -> Group:
    lines: list[Text | Table] = []
    for label, side in (("A", result.a), ("B", result.b)):
        lines.append(Text(f"{label}  {side.job_id}  {side.profile}  model {side.model}", style="bold"))
        lines.append(Text(f"   {side.coverage}{interval_note(side.ci95)}"))
    lines.append(Text(tally(result)))
    lines.append(Text(difference_line(result)))
    if result.excluded:
        shown = ", ".join(f"{e.task} ({e.reason})" for e in result.excluded[:5])
        more = f", and {len(result.excluded) - 5} more" if len(result.excluded) > 5 else ""
        lines.append(
            Text(f"excluded: {result.only_a} only A scored, {result.only_b} only B scored: {shown}{more}")
        )
    if result.dimensions:
        lines.append(
            table(
                ["dimension", "B - A", "95% CI", "p", "tasks", "note"],
                [
                    [
                        d.name,
                        None if d.difference is None else f"{d.difference:+.4g}",
                        None
                        if d.ci95 is None
                        else f"{d.ci95[0]:+.4g} to {d.ci95[1]:+.4g}" + (" (cut)" if d.ci95_clamped else ""),
                        None if d.p_value is None else f"{d.p_value:.3g}",
                        d.n_tasks,
                        d.refused or d.no_interval or (d.definition.describe() if d.definition else None),
                    ]
                    for d in result.dimensions
                ],
            )
        )
    if (tasks := task_table(result, every_task=every_task)) is not None:
        lines.append(tasks)
    if (unchanged := unchanged_note(result, every_task=every_task)) is not None:
        lines.append(Text(unchanged))
    lines.append(Text(f"method: {result.method}", style="dim"))
    return Group(*lines)


def candidates_view(results: "list[Comparison]", *, every_task: bool = False) -> Group:
    """A baseline against several candidates: each candidate's B - A and tally, then the tasks."""
    base = results[0].a
    lines: list[Text | Table] = [
        Text(f"A   {base.job_id}  {base.profile}  model {base.model}", style="bold"),
        Text(f"    {base.coverage}{interval_note(base.ci95)}"),
    ]
    for n, result in enumerate(results, start=1):
        side = result.b
        lines.append(Text(f"B{n}  {side.job_id}  {side.profile}  model {side.model}", style="bold"))
        lines.append(Text(f"    {side.coverage}{interval_note(side.ci95)}"))
        lines.append(Text(f"    {tally(result)}"))
        lines.append(Text(f"    {difference_line(result).replace('B - A', f'B{n} - A', 1)}"))
    lines.append(candidates_table(results, every_task=every_task))
    lines.append(Text(f"method: {results[0].method}", style="dim"))
    return Group(*lines)
