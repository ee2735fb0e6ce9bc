"""Rollouts: one trial of one task with one profile, started now, then polled or streamed."""

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from envloop.api.auth import ProjectContext, TrialReader
from envloop.api.events import SSE_RESPONSE, event_stream
from envloop.api.schemas import ERRORS
from envloop.services import rollouts
from envloop.services.rollouts import ProgressFeed, RolloutRequest, RolloutView

router = APIRouter(prefix="/v1/rollouts", tags=["rollouts"], responses=ERRORS)


@router.post("", status_code=201)
def start_rollout(request: RolloutRequest, ctx: ProjectContext) -> RolloutView:
    """Queue one attempt (a one-trial job tagged rollout=true); its trial ID is the rollout's ID."""
    return rollouts.start_rollout(ctx, request)


@router.get("/{trial_id}")
def get_rollout(trial_id: str, ctx: TrialReader) -> RolloutView:
    return rollouts.get_rollout(ctx, trial_id)


@router.get("/{trial_id}/events", response_class=StreamingResponse, responses=SSE_RESPONSE)
def rollout_events(trial_id: str, ctx: TrialReader) -> StreamingResponse:
    """The rollout's status changes as server-sent events, until it ends."""
    return event_stream(ProgressFeed(ctx, rollouts.get_rollout(ctx, trial_id).job_id))
