"""Rollouts written out by hand: the event stream of one rollout."""

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from envloop.api.auth import TrialReader
from envloop.api.events import SSE_RESPONSE, event_stream
from envloop.api.schemas import ERRORS
from envloop.services import rollouts
from envloop.services.rollouts import ProgressFeed

router = APIRouter(prefix="/v1/rollouts", tags=["rollouts"], responses=ERRORS)


@router.get("/{trial_id}/events", response_class=StreamingResponse, responses=SSE_RESPONSE)
def rollout_events(trial_id: str, ctx: TrialReader) -> StreamingResponse:
    """The rollout's status changes as server-sent events, until it ends."""
    return event_stream(ProgressFeed(ctx, rollouts.get_rollout(ctx, trial_id).job_id))
