"""A trial's model usage (calls, retries, tokens) and why its agent loop stopped: recorded with the
outcome, shown on the trial page beside the execution status."""

from pydantic import BaseModel, Field

from envloop.services.context import Context
from envloop.services.trial_reads import trial_row


class TrialUsage(BaseModel):
    usage: dict[str, int] = Field(description="model calls, retries and tokens (zero counts left out)")
    stop_reason: str | None


def trial_usage(ctx: Context, trial_id: str) -> TrialUsage:
    row = trial_row(ctx, trial_id)
    return TrialUsage(
        usage={k: int(v) for k, v in dict(row.usage or {}).items()}, stop_reason=row.stop_reason
    )
