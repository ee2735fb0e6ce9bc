"""Masking secret values in text that leaves a trial (messages, notes, warnings, names).

Pure: the file side (kept logs and artifacts) is environments/keeping.py.
"""

from collections.abc import Iterable

from envloop.core.destinations import masked as masked_destinations
from envloop.core.trial import TrialFlag, TrialOutcome

MASK = b"***"


def mask_text(text: str, secrets: Iterable[str]) -> str:
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, MASK.decode())
    return text


def mask_outcome(outcome: TrialOutcome, secrets: Iterable[str]) -> TrialOutcome:
    """The outcome with secret values masked in every field that can carry trial output: the
    error message, the reward note (a verifier may write `score for $JUDGE_KEY`), dimension names
    (a secret used as a reward.json key), warnings, the sandbox note, the stop reason, every
    field of every flag (a tampered path may hold one) and the hosts the trial contacted. Two
    dimension names that mask alike are kept apart by a suffix rather than merged."""
    secrets = [s for s in secrets if s]
    if not secrets:
        return outcome

    def masked(text: str | None) -> str | None:
        return None if text is None else mask_text(text, secrets)

    dimensions: dict[str, float] = {}
    for name, value in outcome.dimensions.items():
        key = mask_text(name, secrets)
        if key != name:
            base, number = key, 1
            while key in dimensions or key in outcome.dimensions:
                number += 1
                key = f"{base} ({number})"
        dimensions[key] = value
    error = outcome.error
    return outcome.model_copy(
        update={
            "error": None
            if error is None
            else error.model_copy(update={"message": mask_text(error.message, secrets)}),
            "reward_note": masked(outcome.reward_note),
            "dimensions": dimensions,
            "warnings": [mask_text(w, secrets) for w in outcome.warnings],
            "sandbox_note": masked(outcome.sandbox_note),
            "stop_reason": masked(outcome.stop_reason),
            "flags": [
                TrialFlag(
                    kind=mask_text(flag.kind, secrets),
                    detail=mask_text(flag.detail, secrets),
                    paths=[mask_text(path, secrets) for path in flag.paths],
                )
                for flag in outcome.flags
            ],
            "destinations": None
            if outcome.destinations is None
            else masked_destinations(outcome.destinations, secrets),
        }
    )
