"""Trials written out by hand: the whole trajectory (streamed, in two formats)."""

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse

from envloop.api.auth import TrialReader
from envloop.api.schemas import ERRORS
from envloop.core.trajectory import Trajectory
from envloop.services import trace
from envloop.trajectories.atif import AtifTrajectory, atif_chunks

router = APIRouter(prefix="/v1/trials", tags=["trials"], responses=ERRORS)


@router.get(
    "/{trial_id}/steps",
    response_model=None,
    responses={
        200: {
            "description": "The whole trajectory, streamed; null when its runner kept none",
            "model": Trajectory | AtifTrajectory | None,
        }
    },
)
def trial_steps(
    trial_id: str,
    ctx: TrialReader,
    format_: Annotated[
        Literal["envloop", "atif"],
        Query(
            alias="format",
            description="envloop (its own steps) or atif (Harbor's Agent Trajectory Interchange Format)",
        ),
    ] = "envloop",
) -> Response:
    """The trial's whole trajectory, step by step (model messages, tool calls, environment changes),
    streamed as it is read, never held whole; null when its runner kept none. Secrets are masked in
    both formats. `/steps/page` reads it a page at a time."""
    outline = trace.load_outline(ctx, trial_id)
    if outline is None:
        return JSONResponse(None)
    if format_ == "envloop":
        return (
            FileResponse(outline.path, media_type="application/json")
            if outline.data is None
            else (Response(outline.data, media_type="application/json"))
        )
    return StreamingResponse(atif_chunks(outline.head, outline.iter_steps()), media_type="application/json")
