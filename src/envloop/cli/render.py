"""Human rendering of results: coverage first, then pass@k / pass^k, then the per-task table."""

from rich.console import Group
from rich.table import Table
from rich.text import Text

from envloop.cli.output import table
from envloop.core.display import coverage_line, format_score
from envloop.core.metrics import ProfileMetrics, null_reasons
from envloop.core.structured import Aggregate, StructuredSummary
from envloop.wire import JobResult


def _attempt(value: float | str) -> str:
    return format_score(value) if isinstance(value, float | int) else value


def profile_block(ref: str, m: ProfileMetrics) -> Group:
    k = m.k
    lines: list[Text | Table] = [
        Text(f"{ref}", style="bold"),
        Text(coverage_line(m)),
    ]
    reasons = null_reasons(m)
    why_binary = f"   ({reasons['pass_at_k']})" if "pass_at_k" in reasons and m.score is not None else ""
    lines.append(
        Text(
            f"pass {format_score(m.pass_)}   pass@{k} {format_score(m.pass_at_k)}   "
            f"pass^{k} {format_score(m.pass_hat_k)}{why_binary}"
        )
    )
    if m.stderr is not None and m.ci95 is not None:
        low, high = (format_score(v) for v in m.ci95)
        lines.append(
            Text(f"95% CI {low} – {high}   (standard error {format_score(m.stderr)}, clustered by task)")
        )
    elif m.score is not None:
        lines.append(Text(f"no interval: {reasons.get('stderr', 'not enough data')}"))
    if m.curve:
        lines.append(
            Text(
                "curve  "
                + "  ".join(
                    f"k={p.k}: {format_score(p.pass_at_k)}/{format_score(p.pass_hat_k)}" for p in m.curve[:8]
                )
                + ("  …" if len(m.curve) > 8 else "")
                + "   (pass@k/pass^k)"
            )
        )
    lines.append(
        table(
            ["task", "attempts", "scored", "mean", "passes", "complete"],
            [
                [
                    r.task,
                    " ".join(_attempt(a) for a in r.attempts),
                    f"{r.scored}/{k}",
                    format_score(r.mean),
                    r.passes,
                    "yes" if r.complete else "no",
                ]
                for r in m.members
            ],
        )
    )
    return Group(*lines)


def _aggregate(value: Aggregate) -> str:
    """Structured values are on their own scales: shown as the numbers they are, never as percents."""
    interval = ""
    if value.ci95 is not None:
        interval = f" (95% CI {value.ci95[0]:.4g} – {value.ci95[1]:.4g})"
    return f"{value.mean:.4g}{interval} over {value.trials} trials, {value.tasks} tasks"


def structured_lines(summary: StructuredSummary) -> list[Text]:
    """The trials' declared structured results (verifier/result.json), when any trial has one."""
    if not summary.trials and not summary.invalid:
        return []
    invalid = f", {summary.invalid} invalid (kept raw in their artifacts)" if summary.invalid else ""
    lines = [Text(f"structured results: {summary.trials} trials{invalid}")]
    if summary.composite is not None:
        lines.append(Text(f"  composite  {_aggregate(summary.composite)}"))
    for name, dimension in sorted(summary.dimensions.items()):
        if dimension.aggregate is not None and dimension.definition is not None:
            shown = f"{_aggregate(dimension.aggregate)}   {dimension.definition.describe()}"
        else:
            shown = f"not aggregated: {dimension.conflict or 'no values'}"
        lines.append(Text(f"  {name}  {shown}"))
    return lines


def result_view(result: JobResult) -> Group:
    parts: list[Text | Group] = [Text(f"job {result.id}  {result.status}  k={result.attempts}")]
    if (flagged := result.flags.line()) is not None:
        parts.append(Text(f"{flagged}: see el trial get (a flag never changes a reward)", style="yellow"))
    for ref, metrics in result.profiles.items():
        parts.append(Text(""))
        parts.append(profile_block(ref, metrics))
        parts.extend(structured_lines(metrics.structured))
        if len(result.profiles) > 1 and (flagged := metrics.flags.line()) is not None:
            parts.append(Text(flagged))
    return Group(*parts)
