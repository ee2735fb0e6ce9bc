"""The last word on a run's outcome before it is recorded, the same for every runner and executor:
the worker passes each outcome through `settle_outcome`, so no runner (a plugin's included) can
leave a model failure counted as a reward or a secret in a flag."""

from envloop.core.model_failures import judge_model_calls
from envloop.core.trial import TrialFlag, TrialOutcome, TrialSpec
from envloop.runners.artifacts import mask_text


def settle_outcome(outcome: TrialOutcome, spec: TrialSpec) -> TrialOutcome:
    """The outcome with the model-failure rule applied and secrets masked in every flag field."""
    outcome = judge_model_calls(outcome)
    secrets = [s for s in spec.secret_values if s]
    if not secrets or not outcome.flags:
        return outcome
    flags = [
        TrialFlag(
            kind=mask_text(flag.kind, secrets),
            detail=mask_text(flag.detail, secrets),
            paths=[mask_text(path, secrets) for path in flag.paths],
        )
        for flag in outcome.flags
    ]
    return outcome.model_copy(update={"flags": flags})
