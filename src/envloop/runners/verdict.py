"""The last word on a run's outcome before it is recorded, the same for every runner and executor:
the worker passes each outcome through `settle_outcome`, so no runner (a plugin's included) can
leave a model failure counted as a reward or a secret in a field it filled (its flags included)."""

from envloop.core.masking import mask_outcome
from envloop.core.model_failures import judge_model_calls
from envloop.core.trial import TrialOutcome, TrialSpec


def settle_outcome(outcome: TrialOutcome, spec: TrialSpec) -> TrialOutcome:
    """The outcome with the model-failure rule applied and secrets masked in every field."""
    return mask_outcome(judge_model_calls(outcome), spec.secret_values)
