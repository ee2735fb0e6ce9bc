"""A trial's trajectory read a page at a time, never whole (`trajectories.pages`): the API's step
pages and ATIF export, the console's trace viewer and a job's tool usage all read it here, so a
trajectory of any size costs the server one step's memory.
"""

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal, TypeVar

from envloop.core.trajectory import TRAJECTORY_FILE, Step, Trajectory
from envloop.errors import NotFoundError, UserError
from envloop.services.context import Context
from envloop.services.trial_reads import trial_row
from envloop.store.artifacts import ArtifactNotFoundError
from envloop.trajectories.atif import atif_chunks
from envloop.trajectories.pages import Outline, TrajectoryFormatError, open_outline
from envloop.wire.trials import PAGE_STEPS, StepPage

__all__ = ["StepPage", "load_outline", "step_page", "trace_step", "trajectory_json", "trial_steps"]
_T = TypeVar("_T")


def load_outline(ctx: Context, trial_id: str, *, checked: bool = False) -> Outline | None:
    """The outline of the trial's `trajectory.json`; None when its runner kept none. `checked`: the
    caller has already found the trial readable."""
    if not checked:
        trial_row(ctx, trial_id)
    try:
        path = ctx.artifacts.trial_file(trial_id, TRAJECTORY_FILE)
        return open_outline(path)
    except ArtifactNotFoundError:
        return None
    except TrajectoryFormatError as exc:
        raise UserError(f"trial {trial_id}: {TRAJECTORY_FILE} {exc}") from None


def require_outline(ctx: Context, trial_id: str) -> Outline:
    outline = load_outline(ctx, trial_id)
    if outline is None:
        raise NotFoundError(f"trial {trial_id} kept no trajectory")
    return outline


def step_page(ctx: Context, trial_id: str, offset: int = 0, limit: int = PAGE_STEPS) -> StepPage:
    """Up to `limit` steps (at most PAGE_STEPS, and at most PAGE_BYTES of them) from `offset`, with the
    trajectory's other fields; `next_offset` continues, null at the end."""
    if offset < 0 or not 1 <= limit <= PAGE_STEPS:
        raise UserError(f"offset must be at least 0 and limit between 1 and {PAGE_STEPS}")
    outline = require_outline(ctx, trial_id)
    steps = _read(trial_id, lambda: outline.steps(offset, limit))
    end = offset + len(steps)
    return StepPage(
        trajectory=outline.head,
        total=outline.total,
        offset=offset,
        steps=steps,
        next_offset=end if end < outline.total else None,
    )


def trial_steps(ctx: Context, trial_id: str) -> Trajectory | None:
    """The whole trajectory, read step by step (for an embedded caller that wants it all; surfaces
    that serve it read pages); None when its runner kept none."""
    outline = load_outline(ctx, trial_id)
    if outline is None:
        return None
    steps = _read(trial_id, lambda: list(outline.iter_steps()))
    return outline.head.model_copy(update={"steps": steps})


def trajectory_json(
    ctx: Context, trial_id: str, format: Literal["envloop", "atif"] = "envloop"
) -> Path | bytes | Iterator[str]:
    """The whole trajectory's JSON, never held whole: its file as kept, or ATIF converted a step at a
    time; null when its runner kept none."""
    outline = load_outline(ctx, trial_id)
    if outline is None:
        return b"null"
    if format == "envloop":
        return outline.path if outline.data is None else outline.data
    return atif_chunks(outline.head, outline.iter_steps())


def trace_step(ctx: Context, trial_id: str, index: int) -> Step:
    outline = require_outline(ctx, trial_id)
    if not 0 <= index < outline.total:
        raise NotFoundError(f"trial {trial_id} has no step {index}")
    return _read(trial_id, lambda: outline.step(index))


def _read(trial_id: str, work: Callable[[], _T]) -> _T:
    try:
        return work()
    except TrajectoryFormatError as exc:
        raise UserError(f"trial {trial_id}: {TRAJECTORY_FILE} {exc}") from None
