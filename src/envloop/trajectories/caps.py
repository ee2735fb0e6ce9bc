"""How large a kept trajectory may be, and how one that is larger is cut, so that no trajectory can
take the server down (every surface reads it a step at a time, `trajectories.pages`).

- One step holds at most `MAX_STEP_BYTES` of JSON. A larger one has its longest texts cut in the
  middle (head and tail kept, with a line saying how much is missing; `output_truncated` or
  `diff_truncated` set where the step has one), then shorter ones, until it fits. Whole outputs stay
  in the trial's logs, which are kept as files. A step that cannot be made to fit (thousands of
  keys in a tool call's arguments) is replaced by a `cut` step saying so.
- The whole trajectory holds at most `MAX_TRAJECTORY_BYTES` and `MAX_TRAJECTORY_STEPS` steps. A
  longer one keeps its first steps and its last (`TAIL_STEPS`, where the verifier's reading is),
  with one `cut` step between them saying how many steps of how many bytes were left out.

Steps are numbered again after a cut, so a step's `index` is always its position in the file.
"""

import json
from typing import Any

from envloop.core.trajectory import CutStep

MAX_STEP_BYTES = 1024 * 1024
MAX_TRAJECTORY_BYTES = 64 * 1024 * 1024
MAX_TRAJECTORY_STEPS = 20_000
TAIL_STEPS = 20
_TAIL_SHARE = 4
"""The tail kept after a cut takes at most this fraction of the budget."""
_FIRST_TEXT_LIMIT = MAX_STEP_BYTES // 4
_LAST_TEXT_LIMIT = 1024
_FLAGS = {"stdout": "output_truncated", "stderr": "output_truncated", "diff": "diff_truncated"}


def compact(data: dict[str, Any]) -> str:
    """A step's JSON as kept: one line (JSON escapes every newline inside a text)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def fit_step(data: dict[str, Any]) -> str:
    """The step's JSON within `MAX_STEP_BYTES`, texts cut as the module docstring says."""
    line = compact(data)
    limit = _FIRST_TEXT_LIMIT
    while len(line.encode()) > MAX_STEP_BYTES and limit >= _LAST_TEXT_LIMIT:
        data = _cut_texts(data, limit)
        line = compact(data)
        limit //= 2
    if len(line.encode()) <= MAX_STEP_BYTES:
        return line
    size = len(compact(data).encode())
    note = f"a {data.get('kind', '')} step of {size} bytes could not be kept within {MAX_STEP_BYTES} bytes"
    marker = CutStep(index=data.get("index", 0), steps=1, bytes=size, note=note)
    if isinstance(data.get("at"), str):
        return compact({**marker.model_dump(mode="json"), "at": data["at"]})
    return marker.model_dump_json()


def _cut_texts(value: Any, limit: int) -> Any:
    """`value` with every text longer than `limit` characters cut in its middle."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        half = limit // 2
        missing = len(value) - 2 * half
        return (
            f"{value[:half]}\n…[{missing} characters cut here: a step of the kept trajectory holds at "
            f"most {MAX_STEP_BYTES} bytes; the trial's logs keep whole outputs]…\n{value[-half:]}"
        )
    if isinstance(value, list):
        return [_cut_texts(item, limit) for item in value]
    if isinstance(value, dict):
        cut = {key: _cut_texts(item, limit) for key, item in value.items()}
        for key, flag in _FLAGS.items():
            if flag in cut and isinstance(value.get(key), str) and cut[key] != value[key]:
                cut[flag] = True
        return cut
    return value


def fit_trajectory(lines: list[str]) -> list[str]:
    """The steps to keep (each one fitted line) within the trajectory's caps, renumbered; a `cut`
    step stands where steps were left out."""
    sizes = [len(line.encode()) + 2 for line in lines]
    if sum(sizes) <= MAX_TRAJECTORY_BYTES and len(lines) <= MAX_TRAJECTORY_STEPS:
        return lines
    tail_budget = MAX_TRAJECTORY_BYTES // _TAIL_SHARE
    tail = 0
    while tail < min(TAIL_STEPS, len(lines) - 1) and sum(sizes[len(lines) - tail - 1 :]) <= tail_budget:
        tail += 1
    budget = MAX_TRAJECTORY_BYTES - sum(sizes[len(lines) - tail :]) - MAX_STEP_BYTES
    most = min(len(lines) - tail, MAX_TRAJECTORY_STEPS - 1 - tail)
    head, used = 0, 0
    while head < most and used + sizes[head] <= budget:
        used += sizes[head]
        head += 1
    dropped = lines[head : len(lines) - tail]
    first = json.loads(dropped[0])
    marker = CutStep(
        steps=len(dropped),
        bytes=sum(sizes[head : len(lines) - tail]),
        note=f"steps {head + 1} to {len(lines) - tail} of {len(lines)} left out: the kept trajectory holds "
        f"at most {MAX_TRAJECTORY_STEPS} steps and {MAX_TRAJECTORY_BYTES} bytes (its first steps and its "
        "last are kept; the trial's logs keep whole outputs)",
    )
    marker_data = {**marker.model_dump(mode="json"), "at": first.get("at")}
    kept = [*lines[:head], compact(marker_data), *lines[len(lines) - tail :]]
    return [_renumbered(line, position) for position, line in enumerate(kept)]


def _renumbered(line: str, position: int) -> str:
    data = json.loads(line)
    if data.get("index") == position:
        return line
    return compact({**data, "index": position})
