"""A trial's trajectory for the trace viewer, which asks for it a window of steps at a time.

The viewer of a 1,000-step trajectory fetches the step list in windows and each selected step on
its own; parsing the whole `trajectory.json` again for each of those requests would cost more than
everything else. The parsed trajectory is kept in memory, keyed by the file's identity (size,
modification time, inode): a running trial's trajectory is replaced by a rename when it grows, which
gives a new key, so a viewer never sees a stale one for long.
"""

import threading
from collections import OrderedDict

from pydantic import BaseModel, Field

from envloop.core.trajectory import TRAJECTORY_FILE, Step, Trajectory
from envloop.services.context import Context
from envloop.services.errors import NotFoundError
from envloop.services.trials import get_trial, trial_steps
from envloop.store.artifacts import ArtifactNotFoundError

_CACHE_SIZE = 16
_cache: OrderedDict[tuple[str, int, int, int], Trajectory] = OrderedDict()
_lock = threading.Lock()


class StepWindow(BaseModel):
    total: int = Field(description="steps in the whole trajectory")
    offset: int
    steps: list[Step]


def load_trace(ctx: Context, trial_id: str) -> Trajectory | None:
    """The trial's trajectory as `trial_steps` reads it, from memory when the file is unchanged."""
    get_trial(ctx, trial_id)
    try:
        path = ctx.artifacts.trial_file(trial_id, TRAJECTORY_FILE)
        info = path.stat()
    except (ArtifactNotFoundError, OSError):
        return None
    key = (str(path), info.st_size, info.st_mtime_ns, info.st_ino)
    with _lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    trajectory = trial_steps(ctx, trial_id)
    if trajectory is not None:
        with _lock:
            _cache[key] = trajectory
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    return trajectory


def step_window(ctx: Context, trial_id: str, offset: int, limit: int) -> StepWindow:
    trajectory = _require(ctx, trial_id)
    offset = max(0, offset)
    return StepWindow(
        total=len(trajectory.steps), offset=offset, steps=trajectory.steps[offset : offset + max(0, limit)]
    )


def trace_step(ctx: Context, trial_id: str, index: int) -> Step:
    trajectory = _require(ctx, trial_id)
    if not 0 <= index < len(trajectory.steps):
        raise NotFoundError(f"trial {trial_id} has no step {index}")
    return trajectory.steps[index]


def _require(ctx: Context, trial_id: str) -> Trajectory:
    trajectory = load_trace(ctx, trial_id)
    if trajectory is None:
        raise NotFoundError(f"trial {trial_id} kept no trajectory")
    return trajectory
