"""A trial's model usage (calls, retries, tokens) and why its agent loop stopped: recorded with the
outcome, shown on the trial page beside the execution status."""

from pydantic import BaseModel, Field
from sqlalchemy import select

from envloop.services.context import Context
from envloop.services.trial_reads import get_trial
from envloop.store.tables import Trial


class TrialUsage(BaseModel):
    usage: dict[str, int] = Field(description="model calls, retries and tokens (zero counts left out)")
    stop_reason: str | None


def trial_usage(ctx: Context, trial_id: str) -> TrialUsage:
    get_trial(ctx, trial_id)
    with ctx.store.read() as session:
        row = session.execute(select(Trial.usage, Trial.stop_reason).where(Trial.id == trial_id)).one()
    return TrialUsage(
        usage={k: int(v) for k, v in dict(row.usage or {}).items()}, stop_reason=row.stop_reason
    )
