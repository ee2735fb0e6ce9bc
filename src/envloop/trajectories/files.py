"""Writing a trial's trajectory with secrets masked and within its caps, and reading it back.

The serialised trajectory is searched for each secret, as written and as JSON escapes it; only when
one occurs are the document's strings masked one by one, so that masking can never break the JSON
or its schema, however short or odd a secret is. The trajectory is written once, at the end of a
run, into the run's own staging directory, which the store publishes whole (a rename) only after
the run's result is recorded: no reader sees it before it is complete, so it is written in place
(a temporary file and a rename cost a trivial trial about as much again as the write itself).

The file is one JSON document laid out for reading a step at a time (`trajectories.pages`): its
first line holds every field but the steps and opens the `steps` array, each step is one line of
compact JSON, and the last line closes the document. Steps are cut to the caps of
`trajectories.caps` on the way.
"""

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from envloop.core import trajectory as schema
from envloop.core.masking import mask_text
from envloop.core.trajectory import TRAJECTORY_FILE, Trajectory
from envloop.trajectories.caps import compact, fit_step, fit_trajectory

STEPS_OPENING = '"steps":['
STEPS_CLOSING = "]}"

_FIELD_NAMES = frozenset(
    name
    for model in vars(schema).values()
    if isinstance(model, type) and issubclass(model, BaseModel)
    for name in model.model_fields
)
"""The schema's own keys: never masked, so that even an absurdly short secret cannot rename a field
(free-form keys, such as a tool call's argument names, are masked like any text)."""


def _masked(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return mask_text(value, secrets)
    if isinstance(value, list):
        return [_masked(item, secrets) for item in value]
    if isinstance(value, dict):
        return {
            key if key in _FIELD_NAMES else mask_text(key, secrets): _masked(item, secrets)
            for key, item in value.items()
        }
    return value


def _forms(secret: str) -> tuple[str, ...]:
    """A secret as written and as it may appear inside a JSON string (escaped quotes, backslashes,
    control or non-ASCII characters)."""
    return secret, json.dumps(secret, ensure_ascii=False)[1:-1], json.dumps(secret)[1:-1]


def _present(text: str, secrets: Iterable[str]) -> list[str]:
    """The secrets that occur in `text` in any of their forms."""
    return [secret for secret in secrets if secret and any(form in text for form in _forms(secret))]


def masked_json(trajectory: Trajectory, secrets: Iterable[str]) -> str:
    """The trajectory as JSON in its kept layout, every secret masked inside the strings it occurs
    in, every step within the caps."""
    secrets = list(secrets)
    head = trajectory.model_dump(mode="json", exclude={"steps"})
    lines = []
    for step in trajectory.steps:
        data = step.model_dump(mode="json")
        present = _present(compact(data), secrets)
        lines.append(fit_step(_masked(data, present) if present else data))
    head_line = compact(head)
    if present := _present(head_line, secrets):
        head_line = compact(_masked(head, present))
    text = f"{head_line[:-1]},{STEPS_OPENING}\n"
    if lines:
        text += ",\n".join(fit_trajectory(lines)) + "\n"
    return text + STEPS_CLOSING + "\n"


def write_trajectory(directory: Path, trajectory: Trajectory, secrets: Iterable[str]) -> Path:
    """Write `trajectory.json` into a run's artifacts directory (which must exist), secrets masked."""
    path = directory / TRAJECTORY_FILE
    path.write_text(masked_json(trajectory, secrets), encoding="utf-8")
    return path


def read_trajectory(path: Path) -> Trajectory:
    return Trajectory.model_validate_json(path.read_bytes())
