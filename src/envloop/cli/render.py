"""Human rendering of results: coverage first, then pass@k / pass^k, then the per-task table."""

from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

from envloop.cli.output import table
from envloop.core.display import (
    attempt_word,
    coverage_line,
    format_cost,
    format_interval,
    format_score,
    latency_words,
)
from envloop.core.metrics import ProfileMetrics, null_reasons
from envloop.core.oracle_check import OracleCheck
from envloop.core.structured import Aggregate, StructuredSummary
from envloop.core.words import INTERVAL, STDERR, plural

if TYPE_CHECKING:
    from envloop.wire import Breakdown, JobResult, JobUsage, ProfileUsage


def interval_note(ci95: tuple[float, float] | None) -> str:
    """A score's 95% interval as it follows the score on a line; nothing when it has none."""
    return f" (95% CI {format_score(ci95[0])} – {format_score(ci95[1])})" if ci95 else ""


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
        spread = f"{STDERR} {format_score(m.stderr)}, clustered by task"
        lines.append(Text(f"{INTERVAL} {format_interval(m.ci95)}   ({spread})"))
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
                    " ".join(attempt_word(a) for a in r.attempts),
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
    interval = "" if value.ci95 is None else f" (95% CI {format_interval(value.ci95, as_score=False)})"
    return f"{value.mean:.4g}{interval} over {plural(value.trials, 'trial')}, {plural(value.tasks, 'task')}"


def structured_lines(summary: StructuredSummary) -> list[Text]:
    """The trials' declared structured results (verifier/result.json), when any trial has one."""
    if not summary.trials and not summary.invalid:
        return []
    invalid = f", {summary.invalid} invalid (kept raw in their artifacts)" if summary.invalid else ""
    lines = [Text(f"structured results: {plural(summary.trials, 'trial')}{invalid}")]
    if summary.composite is not None:
        lines.append(Text(f"  composite  {_aggregate(summary.composite)}"))
    for name, dimension in sorted(summary.dimensions.items()):
        if dimension.aggregate is not None and dimension.definition is not None:
            shown = f"{_aggregate(dimension.aggregate)}   {dimension.definition.describe()}"
        else:
            shown = f"not aggregated: {dimension.conflict or 'no values'}"
        lines.append(Text(f"  {name}  {shown}"))
    return lines


def breakdown_view(found: "Breakdown") -> Group:
    """One table per profile: each group's score with its coverage and interval."""
    parts: list[Text | Table] = [Text(f"By {found.by}", style="bold")]
    if found.multi_valued:
        parts.append(
            Text(
                f"{found.by} is a list for some tasks: such a task counts in the group of each of its "
                "values, so the groups overlap"
            )
        )
    profiles = list(found.groups[0].profiles) if found.groups else []
    for ref in profiles:
        rows = []
        for group in found.groups:
            metrics = group.profiles[ref]
            name = group.value if group.value is not None else f"(no {found.by})"
            rows.append([name, len(group.tasks), metrics.coverage, format_interval(metrics.ci95)])
        parts.append(table([found.by, "tasks", f"{ref}: score and coverage", "95% CI"], rows))
    return Group(*parts)


def usage_lines(usage: "JobUsage") -> list[Text]:
    """Per profile, then for the job: model calls and tokens, their cost, how long trials took."""
    lines = []
    named = [(ref, u) for ref, u in usage.profiles.items()]
    if len(named) > 1:
        named.append(("job", _as_profile(usage)))
    for ref, found in named:
        cost = format_cost(found.cost, usage.currency) if found.cost is not None else f"— ({found.cost_note})"
        latency = found.latency
        took = latency_words(latency.median_sec, latency.p90_sec, latency.max_sec) if latency.trials else "—"
        lines.append(
            Text(
                f"{ref}: {plural(found.calls, 'model call')}, tokens {found.input_tokens:,} in / "
                f"{found.output_tokens:,} out, cost {cost}, trial time {took}"
            )
        )
    return lines


def _as_profile(usage: "JobUsage") -> "ProfileUsage":
    """The job's totals in a profile's shape, for one more line."""
    from envloop.wire import ProfileUsage  # noqa: PLC0415 - loaded with JobUsage by then

    parts = list(usage.profiles.values())
    note = next((p.cost_note for p in parts if p.cost is None), None)
    return ProfileUsage(
        model=None,
        trials=sum(p.trials for p in parts),
        calls=usage.calls,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=sum(p.cache_read_tokens for p in parts),
        cost=usage.cost,
        cost_note=note,
        latency=usage.latency,
    )


def result_view(result: "JobResult") -> Group:
    parts: list[Text | Group] = [Text(f"job {result.id}  {result.status}  k={result.attempts}")]
    if (flagged := result.flags.line()) is not None:
        parts.append(Text(f"{flagged}: see el trial get (a flag never changes a reward)", style="yellow"))
    for ref, metrics in result.profiles.items():
        parts.append(Text(""))
        parts.append(profile_block(ref, metrics))
        parts.extend(structured_lines(metrics.structured))
        if metrics.oracle is not None:
            parts.extend(oracle_lines(metrics.oracle, result.verifier_environment))
        if len(result.profiles) > 1 and (flagged := metrics.flags.line()) is not None:
            parts.append(Text(flagged))
    return Group(*parts)


_MISSES_SHOWN = 10


def oracle_lines(check: OracleCheck, verifier_environment: str) -> list[Text]:
    """`oracle passes on 18 of 20 tasks with every verifier apart; not on: a (reward 0), …`."""
    where = (
        " with every verifier apart (--verifier-environment separate)"
        if verifier_environment == "separate"
        else ""
    )
    style = "yellow" if check.missed else ""
    lines = [Text(f"oracle {check.line()}{where}", style=style)]
    shown = ", ".join(f"{miss.task} ({miss.why})" for miss in check.missed[:_MISSES_SHOWN])
    if shown:
        more = len(check.missed) - _MISSES_SHOWN
        lines.append(
            Text(f"  not on: {shown}" + (f", and {more} more (--json lists all)" if more > 0 else ""))
        )
    return lines
