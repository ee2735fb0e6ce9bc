"""Why a job's attempts are failed, unscored, cancelled or excluded: trials grouped by reason.

The job page answers "why are attempts missing?" with these groups, each linking to a few of its
trials. A trial belongs to one group: an execution failure (by error type and message), a finished
attempt without a reward (the verifier's note), a cancelled attempt, or one a user invalidated.
Pending and running attempts are not failures; coverage counts them as waiting.
"""

from sqlalchemy import and_, or_, select

from envloop.services.context import Context
from envloop.services.jobs import load_job
from envloop.services.results import countable
from envloop.store.tables import Profile, Trial
from envloop.wire.diagnosis import EXAMPLES, FailureGroup, FailureKind

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = ["EXAMPLES", "FailureGroup", "FailureKind"]

REASON_CHARS = 300


def _reason(text: str | None, fallback: str) -> str:
    first = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return first[:REASON_CHARS] or fallback


def failure_summary(ctx: Context, job_id: str) -> list[FailureGroup]:
    """The job's failure groups, largest first (a failed trial with a reward still counts here: its
    execution failed even though the verifier scored what it left)."""
    query = (
        select(
            Trial.id,
            Trial.status,
            Trial.error_type,
            Trial.error_message,
            Trial.reward,
            Trial.reward_note,
            Trial.invalidated,
            Trial.invalidated_reason,
            Profile.name,
            Profile.version,
        )
        .join(Profile, Profile.id == Trial.profile_id)
        .where(
            Trial.job_id == job_id,
            or_(
                Trial.invalidated.is_(True),
                Trial.status.in_(("failed", "cancelled")),
                and_(Trial.status == "completed", Trial.reward.is_(None)),
            ),
        )
        .order_by(Trial.profile_id, Trial.member_position, Trial.attempt)
    )
    with ctx.store.read() as session:
        load_job(session, ctx.project_id, job_id)
        rows = session.execute(query).all()
    groups: dict[tuple[str, str | None, str], FailureGroup] = {}
    for row in rows:
        kind: FailureKind
        error_type: str | None = None
        if row.invalidated:
            kind, reason = "invalidated", _reason(row.invalidated_reason, "no reason given")
        elif row.status == "failed":
            kind, error_type = "failed", row.error_type
            reason = _reason(row.error_message, "no message")
        elif row.status == "cancelled":
            kind, reason = "cancelled", "cancelled before it finished"
        else:
            kind, reason = "no_reward", _reason(row.reward_note, "no reward and no note")
        key = (kind, error_type, reason)
        group = groups.get(key)
        if group is None:
            group = groups[key] = FailureGroup(
                kind=kind, error_type=error_type, reason=reason, count=0, by_profile={}, trial_ids=[]
            )
        group.count += 1
        if kind == "failed" and row.reward is not None and countable(row.reward):
            group.rewarded += 1
        ref = f"{row.name}@{row.version}"
        group.by_profile[ref] = group.by_profile.get(ref, 0) + 1
        if len(group.trial_ids) < EXAMPLES:
            group.trial_ids.append(row.id)
    return sorted(groups.values(), key=lambda g: (-g.count, g.kind, g.error_type or "", g.reason))
