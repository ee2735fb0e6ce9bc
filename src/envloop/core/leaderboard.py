"""The rules of the project leaderboard (SPEC section 4), free of storage.

A board only holds runs that measured the same thing: the same frozen dataset revision, runner
reference, task names and digests, and attempt count. `RunKey` is that compatibility key; a run
whose key differs is refused with the differing field named, so a user never has to guess why.

Ranking is by primary score, highest first. Equal scores share a rank (1, 2, 2, 4) and are marked
tied; within a tie, and everywhere else, the order is fully determined: fewer missing attempts
first, then earlier additions, then job and profile IDs. A row without a score has no rank and is
listed last: an unmeasured run is not a worse run.
"""

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict

NAMES_SHOWN = 3


class RunKey(BaseModel):
    """What must be equal for two runs to share a board."""

    model_config = ConfigDict(frozen=True)

    dataset: str
    runner: str
    attempts: int
    tasks: tuple[tuple[str, str], ...]
    """(name, digest) of every selected task, in dataset order."""

    def digest(self) -> str:
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def key_differences(
    first: RunKey, second: RunKey, names: tuple[str, str] = ("board", "this run")
) -> list[str]:
    """Each field in which the two keys differ, as a sentence naming the field; [] when they agree.

    `names` label the two sides in the sentences: "attempt count differs: 2 (board) vs 3 (this run)".
    """
    one, two = names
    found = [
        f"{label} differs: {a} ({one}) vs {b} ({two})"
        for label, a, b in (
            ("dataset revision", first.dataset, second.dataset),
            ("runner reference", first.runner, second.runner),
            ("attempt count", first.attempts, second.attempts),
        )
        if a != b
    ]
    tasks_one, tasks_two = dict(first.tasks), dict(second.tasks)
    only_one = [name for name in tasks_one if name not in tasks_two]
    only_two = [name for name in tasks_two if name not in tasks_one]
    if only_one or only_two:
        parts = [
            f"{len(listed)} only in {label} ({_names(listed)})"
            for label, listed in ((one, only_one), (two, only_two))
            if listed
        ]
        found.append("task names differ: " + ", ".join(parts))
    changed = [name for name, digest in tasks_two.items() if tasks_one.get(name, digest) != digest]
    if changed:
        found.append(f"task digests differ: {len(changed)} tasks have other content ({_names(changed)})")
    return found


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (", …" if len(names) > NAMES_SHOWN else "")


def model_label(params: Mapping[str, object], profile_ref: str) -> str:
    """The model column: the profile's MODEL_NAME when it has a visible one, else the profile itself."""
    model = params.get("MODEL_NAME")
    return model if isinstance(model, str) and model.strip() else profile_ref


class Standing(Protocol):
    """What ranking reads from a row."""

    @property
    def score(self) -> float | None: ...
    @property
    def missing(self) -> int: ...
    @property
    def added_at(self) -> datetime: ...
    @property
    def job_id(self) -> str: ...
    @property
    def profile(self) -> str: ...


class Placement(NamedTuple):
    row: int
    """Position of the row in the input."""
    rank: int | None
    tied: bool


def rank_standings(rows: Sequence[Standing]) -> list[Placement]:
    """Placements of `rows` in display order (see the module docstring for the rules)."""

    def order(index: int) -> tuple[float, int, datetime, str, str]:
        row = rows[index]
        score = row.score
        return (-score if score is not None else 0.0, row.missing, row.added_at, row.job_id, row.profile)

    scores = [row.score for row in rows]
    counts = Counter(scores)
    ranked = sorted((i for i, score in enumerate(scores) if score is not None), key=order)
    placements: list[Placement] = []
    rank, previous = 0, None
    for position, i in enumerate(ranked, start=1):
        if scores[i] != previous:
            rank, previous = position, scores[i]
        placements.append(Placement(i, rank, counts[scores[i]] > 1))
    unscored = sorted((i for i, score in enumerate(scores) if score is None), key=order)
    placements.extend(Placement(i, None, False) for i in unscored)
    return placements
