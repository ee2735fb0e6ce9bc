"""Trials: one attempt's record, logs, artifacts (listed and downloaded), invalidation."""

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse

from envloop.api.auth import ProjectContext, TrialReader
from envloop.api.schemas import ERRORS, InvalidateRequest
from envloop.core.trajectory import Trajectory
from envloop.services import trace, trials
from envloop.services.trials import LOG_PAGE_BYTES, LogPhase, TrialView
from envloop.store.artifacts import ArtifactInfo
from envloop.trajectories.atif import AtifTrajectory, atif_chunks
from envloop.wire.trials import PAGE_STEPS, StepPage

router = APIRouter(prefix="/v1/trials", tags=["trials"], responses=ERRORS)


@router.get("/{trial_id}")
def get_trial(trial_id: str, ctx: TrialReader) -> TrialView:
    """Status, error type and exit code, reward, dimensions, phases, sandbox mode."""
    return trials.get_trial(ctx, trial_id)


@router.get("/{trial_id}/logs")
def trial_logs(
    trial_id: str,
    ctx: TrialReader,
    phase: LogPhase = "agent",
    offset: Annotated[int, Query(ge=0, description="first byte of each stream to return")] = 0,
    limit: Annotated[
        int, Query(ge=1, le=LOG_PAGE_BYTES, description="most bytes of each stream to return")
    ] = LOG_PAGE_BYTES,
) -> dict[str, str]:
    """The captured output of a phase, by stream, one page at a time (secrets were masked when they
    were kept); a phase that kept no output gives an empty object. A whole log streams from its
    artifact (`agent/stdout.txt`, …), which also answers HTTP Range requests."""
    return trials.trial_logs(ctx, trial_id, phase, offset, limit)


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


@router.get("/{trial_id}/steps/page")
def trial_step_page(
    trial_id: str,
    ctx: TrialReader,
    offset: Annotated[int, Query(ge=0, description="the first step to return")] = 0,
    limit: Annotated[int, Query(ge=1, le=PAGE_STEPS, description="most steps to return")] = PAGE_STEPS,
) -> StepPage:
    """A page of the trial's trajectory: its steps from `offset` (at most `limit`, and at most 4 MiB of
    them), its other fields, and where the next page starts."""
    return trace.step_page(ctx, trial_id, offset, limit)


@router.get("/{trial_id}/artifacts")
def list_artifacts(trial_id: str, ctx: TrialReader) -> list[ArtifactInfo]:
    return trials.list_artifacts(ctx, trial_id)


@router.get(
    "/{trial_id}/artifacts/{path:path}",
    response_class=FileResponse,
    responses={200: {"description": "The file's bytes", "content": {"application/octet-stream": {}}}},
)
def download_artifact(trial_id: str, path: str, ctx: TrialReader) -> FileResponse:
    """One kept file, by its path within the trial (as the artifact list gives it)."""
    trials.get_trial(ctx, trial_id)
    return FileResponse(ctx.artifacts.trial_file(trial_id, path), media_type="application/octet-stream")


@router.post("/{trial_id}/invalidate")
def invalidate_trial(trial_id: str, body: InvalidateRequest, ctx: ProjectContext) -> TrialView:
    """Exclude the trial's reward from every aggregate, keeping its record (or, with undo, count it again)."""
    return trials.invalidate_trial(ctx, trial_id, body.reason, undo=body.undo)
