"""Trials' declared structured results, read from the artifact store where the runner keeps them.

The runner copies the verifier's `/logs/verifier/result.json` into the trial's artifacts untouched;
it is validated here, when read, so the raw file always stays available for inspection and a
stricter or newer validator never needs the trial to run again.
"""

from collections.abc import Iterable

from envloop.core.status import TERMINAL
from envloop.core.structured import MAX_BYTES, Collected, StructuredReading, collect, parse_structured
from envloop.services.context import Context
from envloop.store.artifacts import STRUCTURED_RESULT, ArtifactNotFoundError


def read_structured(ctx: Context, trial_id: str) -> StructuredReading | None:
    """The trial's structured result, or why it is invalid; None when the verifier declared none."""
    try:
        path = ctx.artifacts.trial_file(trial_id, STRUCTURED_RESULT)
    except ArtifactNotFoundError:
        return None
    with path.open("rb") as handle:
        return parse_structured(handle.read(MAX_BYTES + 1))


def collect_by_profile(ctx: Context, trials: Iterable[tuple[str, str, str]]) -> dict[str, Collected]:
    """Group the structured results of (trial id, profile id, task) triples by profile id.

    Callers pass only the trials that count: finished and not invalidated, the same rule as rewards.
    """
    readings: dict[str, list[tuple[str, StructuredReading]]] = {}
    for trial_id, profile_id, task in trials:
        reading = read_structured(ctx, trial_id)
        if reading is not None:
            readings.setdefault(profile_id, []).append((task, reading))
    return {profile_id: collect(pairs) for profile_id, pairs in readings.items()}


def counts(status: str, invalidated: bool) -> bool:
    """Whether a trial's structured result enters aggregates (as its reward would)."""
    return status in TERMINAL and not invalidated
