"""Counting flagged trials (`core.trial.TrialFlag`): how many trials carry any flag, and how many
carry each kind, for a job's result, each of its profiles and a leaderboard row."""

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import Field

from envloop.core.lazy import LazyModel


class FlagCounts(LazyModel):
    flagged: int = Field(default=0, description="trials with at least one flag")
    by_kind: dict[str, int] = Field(default_factory=dict, description="trials with a flag of each kind")

    def line(self) -> str | None:
        """`3 trials flagged (tamper 2, model-errors 1)`; None when none is."""
        if not self.flagged:
            return None
        kinds = ", ".join(f"{kind} {count}" for kind, count in self.by_kind.items())
        noun = "trial" if self.flagged == 1 else "trials"
        return f"{self.flagged} {noun} flagged ({kinds})"


def count_flags(trials: Iterable[Sequence[Mapping[str, Any]]]) -> FlagCounts:
    """The counts over trials given as their stored flag lists ([] for an unflagged trial)."""
    flagged = 0
    kinds: Counter[str] = Counter()
    for flags in trials:
        if flags:
            flagged += 1
            kinds.update({str(flag.get("kind", "")) for flag in flags})
    return FlagCounts(flagged=flagged, by_kind=dict(kinds.most_common()))
