"""The rules of the project leaderboard (SPEC section 4), free of storage.

A board only holds runs that measured the same thing: the same frozen dataset revision, runner
reference, task names and digests, and attempt count. `RunKey` is that compatibility key; a run
whose key differs is refused with the differing field named, so a user never has to guess why.

Missing never pays. A row's interval of possible scores runs from its lower bound (the mean over
every requested attempt with each missing one counted as 0) to its upper bound (each missing one
counted as the best reward: 1, or the row's highest reward when that is higher). Rows are ranked by
the lower bound, highest first, so an attempt left without a reward (the agent made the verifier
hang, filled its disk, crashed the verifier) can only cost the row, never lift it above a row that
was measured; the mean of the scored attempts and the coverage are shown beside it.

Rows with the same lower bound and the same missing count share a rank (1, 2, 2, 4) and are marked
tied; at an equal lower bound, fewer missing attempts rank first. The order is fully determined:
then earlier additions, then job and profile IDs.

Two rows are separated when one's lower bound is above the other's upper bound: whatever the
missing attempts would have scored, the order stands. Every other pair is not separated (their
intervals overlap, ends included), and each row lists the ranks of the rows it is not separated
from; a row with full coverage has a single point as its interval, so two such rows with the same
score are not separated either.
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
    def lower_bound(self) -> float: ...
    @property
    def upper_bound(self) -> float: ...
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
    rank: int
    tied: bool
    not_separated_from: tuple[int, ...]
    """Ranks of the other rows whose interval overlaps this row's (empty: separated from all)."""


def rank_standings(rows: Sequence[Standing]) -> list[Placement]:
    """Placements of `rows` in display order (see the module docstring for the rules)."""

    def order(index: int) -> tuple[float, int, datetime, str, str]:
        row = rows[index]
        return (-row.lower_bound, row.missing, row.added_at, row.job_id, row.profile)

    keys = [(_level(row.lower_bound), row.missing) for row in rows]
    counts = Counter(keys)
    ordered = sorted(range(len(rows)), key=order)
    ranks: dict[int, int] = {}
    previous = None
    for position, i in enumerate(ordered, start=1):
        if keys[i] != previous:
            rank, previous = position, keys[i]
        ranks[i] = rank
    return [
        Placement(i, ranks[i], counts[keys[i]] > 1, _overlapping(rows, i, ordered, ranks)) for i in ordered
    ]


def _overlapping(
    rows: Sequence[Standing], i: int, ordered: list[int], ranks: dict[int, int]
) -> tuple[int, ...]:
    low, high = _level(rows[i].lower_bound), _level(rows[i].upper_bound)
    found = {
        ranks[j]
        for j in ordered
        if j != i and low <= _level(rows[j].upper_bound) and _level(rows[j].lower_bound) <= high
    }
    return tuple(sorted(found))


def _level(bound: float) -> float:
    """A bound as compared: two means of the same rewards summed in another order are equal."""
    return round(bound, 12)
