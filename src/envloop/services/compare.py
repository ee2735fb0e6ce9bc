"""Paired comparison of two runs: two jobs, or two profiles within one job.

The question is "is B better than A, and by how much?". Both runs are compared task by task on
the tasks both scored (pairing removes the task difficulty they share), giving the mean per-task
difference B - A with its standard error, the correlation of the two runs' task scores, and a 95%
interval and p-value from one paired t test (`core.stats.PAIRED_METHOD`), in one unit (percentage
points between rates). Tasks only one side scored are left out and listed.

Two jobs are compared only when they measured the same thing: the same dataset revision (so the
same task contents) and runner, and at least one task in common; otherwise the comparison is
refused, naming the reason. Other differences (attempt counts, task selections) are compared with
a warning each. Structured dimensions are compared only where both runs define them identically;
otherwise that dimension is refused with the reason.
"""

from dataclasses import dataclass

from sqlalchemy import select

from envloop.core.display import DifferenceUnit
from envloop.core.leaderboard import RunKey, key_differences
from envloop.core.metrics import compare_metrics, paired_tasks, rewards_are_rates
from envloop.core.status import TERMINAL
from envloop.core.structured import Collected, definition_conflict
from envloop.errors import UserError
from envloop.services.compare_attempts import pair_attempts, side_attempts
from envloop.services.compare_usage import pricer, table_or_none, with_usage
from envloop.services.context import Context
from envloop.services.job_reads import ProfileRow
from envloop.services.jobs import JobView, job_profiles, job_views, load_job
from envloop.services.leaderboard import pick_profile, run_key, run_summary
from envloop.services.results import ProfileResult, job_result_detail
from envloop.store.reads import SessionReads
from envloop.store.tables import Job
from envloop.wire.compare import (
    AttemptOutcome,
    Comparison,
    DimensionComparison,
    Excluded,
    Side,
    TaskAttempts,
)

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = ["AttemptOutcome", "Comparison", "DimensionComparison", "Excluded", "Side", "TaskAttempts"]


@dataclass(frozen=True)
class _Run:
    """One side as loaded: what is shown of it, its metrics and its structured values."""

    side: Side
    metrics: ProfileResult
    structured: Collected


def compare_runs(
    ctx: Context,
    job_a: str,
    job_b: str | None = None,
    profile_a: str | None = None,
    profile_b: str | None = None,
) -> Comparison:
    """Compare B against A. Without `job_b`, two profiles of `job_a` are compared (by default its
    first and second profile when it ran exactly two)."""
    same_job = job_b is None or job_b == job_a
    with ctx.store.read() as session:
        first = load_job(session, ctx.project_id, job_a)
        second = first if same_job else load_job(session, ctx.project_id, job_b or job_a)
        profiles_a, profiles_b = (
            job_profiles(SessionReads(session), first.id),
            job_profiles(SessionReads(session), second.id),
        )
        if same_job:
            chosen_a, chosen_b = _two_of_one_job(first.id, profiles_a, profile_a, profile_b)
        else:
            chosen_a = pick_profile(first.id, profiles_a, profile_a, "A")
            chosen_b = pick_profile(second.id, profiles_b, profile_b, "B")
        key_a, key_b = run_key(session, first), run_key(session, second)
        table = table_or_none(ctx)
        attempts, usage = with_usage(
            pair_attempts(
                side_attempts(
                    session,
                    first.id,
                    chosen_a.id,
                    first.tasks,
                    first.attempts,
                    pricer(table, chosen_a.params),
                ),
                side_attempts(
                    session,
                    second.id,
                    chosen_b.id,
                    second.tasks,
                    second.attempts,
                    pricer(table, chosen_b.params),
                ),
            )
        )
    if not same_job:
        _refuse_incomparable(key_a, key_b)
    result_a, structured_a = job_result_detail(ctx, first.id)
    result_b, structured_b = (result_a, structured_a) if same_job else job_result_detail(ctx, second.id)
    runs = []
    for profile, result, structured, key in (
        (chosen_a, result_a, structured_a, key_a),
        (chosen_b, result_b, structured_b, key_b),
    ):
        ref = _ref(profile)
        metrics = result.profiles[ref]
        summary = run_summary(key, result.id, result.status, profile, metrics)
        side = Side(**dict(summary), score_counts=metrics.score_counts)
        runs.append(_Run(side, metrics, structured[ref]))
    a, b = runs
    differences = [] if same_job else key_differences(key_a, key_b, ("A", "B"))
    warnings = [f"not comparable: {d}" for d in differences]
    warnings += [
        f"job {s.job_id} ({label}) is {s.job_status}: its numbers will still change"
        for label, s in (("A", a.side), ("B", b.side))
        if s.job_status not in TERMINAL and (label == "A" or not same_job)
    ]
    paired = compare_metrics(a.metrics, b.metrics)
    difference = paired.difference
    excluded = [Excluded(task=t, reason="only A scored it") for t in paired.only_a]
    excluded += [Excluded(task=t, reason="only B scored it") for t in paired.only_b]
    rates = rewards_are_rates(a.metrics) and rewards_are_rates(b.metrics)
    unit: DifferenceUnit = "points" if rates else "reward"
    return Comparison(
        a=a.side,
        b=b.side,
        unit=unit,
        n_tasks=difference.tasks,
        improved=sum(t.difference > 0 for t in paired.tasks),
        regressed=sum(t.difference < 0 for t in paired.tasks),
        unchanged=sum(t.difference == 0 for t in paired.tasks),
        difference=difference.mean_difference,
        stderr=difference.stderr,
        ci95=difference.ci95,
        ci95_clamped=difference.clamped,
        p_value=difference.p_value,
        no_interval=difference.no_interval,
        correlation=difference.correlation,
        only_a=len(paired.only_a),
        only_b=len(paired.only_b),
        excluded=excluded,
        comparable=not differences,
        warnings=warnings,
        tasks=paired.tasks,
        dimensions=_dimensions(a.structured, b.structured),
        attempts=attempts,
        usage=usage,
        currency=table.currency if table is not None else None,
    )


def comparable_jobs(ctx: Context, job_id: str, limit: int = 50) -> list[JobView]:
    """Other jobs this one can be compared with (same dataset revision and runner), newest first."""
    with ctx.store.read() as session:
        job = load_job(session, ctx.project_id, job_id)
        query = (
            select(Job)
            .where(
                Job.project_id == ctx.project_id,
                Job.dataset_id == job.dataset_id,
                Job.runner == job.runner,
                Job.id != job.id,
            )
            .order_by(Job.created_at.desc(), Job.id.desc())
            .limit(limit)
        )
        return job_views(SessionReads(session), list(session.scalars(query)))


def _refuse_incomparable(a: RunKey, b: RunKey) -> None:
    """Two jobs that did not measure the same thing cannot be told apart by their scores: a
    difference would mix the change of model with the change of tasks or harness."""
    reason = None
    if a.dataset != b.dataset:
        reason = f"they ran different dataset revisions ({a.dataset} vs {b.dataset}), whose tasks differ"
    elif a.runner != b.runner:
        reason = f"they ran with different runners ({a.runner} vs {b.runner})"
    elif not {name for name, _ in a.tasks} & {name for name, _ in b.tasks}:
        reason = "they share no task"
    if reason is not None:
        raise UserError(f"cannot compare these jobs: {reason}")


def _dimensions(a: Collected, b: Collected) -> list[DimensionComparison]:
    compared = []
    for name in sorted(set(a.definitions) | set(b.definitions)):
        definition_a, definition_b = a.definition(name), b.definition(name)
        if name not in a.definitions or name not in b.definitions:
            side = "A" if name in a.definitions else "B"
            compared.append(DimensionComparison(name=name, refused=f"{name}: only {side} reports it"))
        elif definition_a is None or definition_b is None:
            side = "A" if definition_a is None else "B"
            reason = f"{name}: {side} defines it differently across trials"
            compared.append(DimensionComparison(name=name, refused=reason))
        elif conflict := definition_conflict(name, definition_a, definition_b):
            compared.append(DimensionComparison(name=name, refused=conflict))
        else:
            rates = definition_a.scale == (0.0, 1.0)
            paired = paired_tasks(_means(a, name), _means(b, name), rates=rates).difference
            compared.append(
                DimensionComparison(
                    name=name,
                    definition=definition_a,
                    n_tasks=paired.tasks,
                    difference=paired.mean_difference,
                    stderr=paired.stderr,
                    ci95=paired.ci95,
                    ci95_clamped=paired.clamped,
                    p_value=paired.p_value,
                    no_interval=paired.no_interval,
                    correlation=paired.correlation,
                )
            )
    return compared


def _means(collected: Collected, name: str) -> dict[str, float]:
    return {task: sum(values) / len(values) for task, values in collected.values[name].items()}


def _ref(profile: ProfileRow) -> str:
    return f"{profile.name}@{profile.version}"


def _two_of_one_job(
    job_id: str, profiles: list[ProfileRow], ref_a: str | None, ref_b: str | None
) -> tuple[ProfileRow, ProfileRow]:
    if ref_a is None and ref_b is None and len(profiles) == 2:
        return profiles[0], profiles[1]
    if ref_a is None or ref_b is None:
        refs = ", ".join(_ref(p) for p in profiles)
        raise UserError(f"job {job_id} ran {refs}: name both profiles to compare, or give a second job")
    if ref_a == ref_b:
        raise UserError(f"comparing profile {ref_a} with itself: choose two different profiles")
    return pick_profile(job_id, profiles, ref_a, "A"), pick_profile(job_id, profiles, ref_b, "B")
