"""Why a job's numbers are what they are, next to the numbers: its failures grouped by reason, how
its trials were isolated, and the warnings its trials carry (a limit cut to the operator's ceiling,
a Dockerfile instruction not executed, plain mode, a network closed by the operator).

A user reading a score must see at once when attempts are missing and why, when the
environment was not what the task asked for, and which trials are flagged (files the agent changed
that the verifier may run, failed model calls); the CLI (`el job result`), the API and the console
all read this one summary.
"""

from collections import Counter
from typing import TYPE_CHECKING

from envloop.core.status import JobStatus
from envloop.core.words import not_run_line, plural
from envloop.services.context import Context
from envloop.services.failures import EXAMPLES, failure_summary
from envloop.services.job_reads import job_row
from envloop.store.reads import query
from envloop.wire.diagnosis import FailureGroup, FlagGroup, JobDiagnosis, NotRunGroup, WarningGroup

if TYPE_CHECKING:
    from envloop.store.reads import Statement

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = ["FlagGroup", "JobDiagnosis", "NotRunGroup", "WarningGroup"]

WARNING_CHARS = 300


def status_note(status: str, failures: list[FailureGroup]) -> str | None:
    """Why a job reads `failed` or `cancelled`: a job fails when any trial's execution failed, even
    when its verifier still scored what the agent left, so the status alone can read as a lost run
    when every attempt has a reward; this sentence says which it is."""
    if status == JobStatus.CANCELLED:
        cancelled = sum(g.count for g in failures if g.kind == "cancelled")
        pronoun = "it" if cancelled == 1 else "they"
        return f"cancelled: {plural(cancelled, 'attempt')} stopped before {pronoun} finished"
    if status != JobStatus.FAILED:
        return None
    failed = [g for g in failures if g.kind == "failed"]
    by_type = Counter[str]()
    for group in failed:
        by_type[group.error_type or "unknown error"] += group.count
    count = sum(by_type.values())
    rewarded = sum(g.rewarded for g in failed)
    types = ", ".join(f"{kind} {n}" for kind, n in by_type.most_common())
    if rewarded == count:
        scored = "each still has a counted reward (the verifier scored what the agent left)"
    elif rewarded:
        scored = f"{rewarded} of them still have a counted reward (the verifier scored what the agent left)"
    else:
        scored = "none of them has a counted reward"
    return f"failed: {plural(count, 'trial')} ended with an error ({types}); {scored}"


@query
def trial_notes() -> "Statement":
    from sqlalchemy import bindparam, select  # noqa: PLC0415 - only when compiled (store.reads)

    from envloop.store.tables import Trial  # noqa: PLC0415

    return (
        select(Trial.id, Trial.sandbox, Trial.warnings, Trial.flags)
        .where(Trial.job_id == bindparam("job_id"))
        .order_by(Trial.profile_id, Trial.member_position, Trial.attempt)
    )


def job_diagnosis(ctx: Context, job_id: str) -> JobDiagnosis:
    with ctx.reads() as reads:
        job = job_row(reads, ctx.project_id, job_id)
        rows = reads.rows(trial_notes, job_id=job_id)
    skipped: dict[str, list[str]] = {}
    for item in job.skipped or []:
        skipped.setdefault(str(item.get("reason", "")), []).append(str(item.get("task", "")))
    sandboxes: Counter[str] = Counter()
    groups: dict[str, WarningGroup] = {}
    flags: dict[tuple[str, str], FlagGroup] = {}
    for row in rows:
        if row.sandbox:
            sandboxes[row.sandbox] += 1
        for kind, detail in dict.fromkeys(
            (str(f.get("kind", "")), str(f.get("detail", ""))[:WARNING_CHARS]) for f in row.flags or []
        ):
            flag = flags.get((kind, detail))
            if flag is None:
                flag = flags[kind, detail] = FlagGroup(kind=kind, detail=detail, count=0, trial_ids=[])
            flag.count += 1
            if len(flag.trial_ids) < EXAMPLES:
                flag.trial_ids.append(row.id)
        for warning in dict.fromkeys(str(w)[:WARNING_CHARS] for w in row.warnings or []):
            group = groups.setdefault(warning, WarningGroup(text=warning, count=0, trial_ids=[]))
            group.count += 1
            if len(group.trial_ids) < EXAMPLES:
                group.trial_ids.append(row.id)
    failures = failure_summary(ctx, job_id)
    return JobDiagnosis(
        status_note=status_note(job.status, failures),
        not_run=[
            NotRunGroup(text=not_run_line(len(tasks), reason), reason=reason, tasks=tasks)
            for reason, tasks in skipped.items()
        ],
        failures=failures,
        sandboxes=dict(sandboxes.most_common()),
        warnings=sorted(groups.values(), key=lambda g: -g.count),
        flags=sorted(flags.values(), key=lambda g: (-g.count, g.kind, g.detail)),
    )
