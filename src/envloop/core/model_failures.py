"""Model failures are not rewards: the one rule, for every agent and runner, read from the model
calls of the trial's trajectory (`usage_totals` counts them, and the calls that failed).

- Every model call failed (refused, HTTP 4xx/5xx, connection errors), and there was at least one:
  the model was never measured. The trial is `failed` with error type `model_error` (unless it
  already failed for the time limit or for a cause outside model and agent) and has no reward,
  whatever the verifier read from what the agent left (a 0 for an untouched task would otherwise
  count as the model's score); that reading stays in the trajectory's verifier step.
- Some calls failed: the trial is scored as the verifier scored it, and flagged `model-errors`
  ("3 of 7 model calls failed"), so a reader knows the agent worked with a flaky endpoint.

Agents that call their model through the worker's gateway have their calls recorded as model
steps too, so the rule covers them without code of their own.
"""

from envloop.core.status import ErrorType, TrialStatus
from envloop.core.trial import MODEL_ERRORS_FLAG, TrialError, TrialFlag, TrialOutcome

_KEPT_ERRORS = frozenset(
    {
        ErrorType.MODEL_ERROR,
        ErrorType.AGENT_TIMEOUT,
        ErrorType.ENVIRONMENT_ERROR,
        ErrorType.INFRASTRUCTURE_ERROR,
    }
)
"""Errors that already say why the trial failed as precisely: the model's own, the time limit (a
model that never answered in time), or a cause outside the model and the agent."""


def judge_model_calls(outcome: TrialOutcome) -> TrialOutcome:
    """The outcome under the rule above (unchanged when no model call failed)."""
    calls = outcome.usage.get("calls", 0)
    failed = outcome.usage.get("failed_calls", 0)
    if not calls or not failed:
        return outcome
    summary = f"{failed} of {calls} model calls failed"
    if failed < calls:
        flag = TrialFlag(kind=MODEL_ERRORS_FLAG, detail=summary)
        return outcome.model_copy(update={"flags": [*outcome.flags, flag]})
    error = outcome.error
    if error is None or error.type not in _KEPT_ERRORS:
        cause = f"; the agent then reported {error.type}: {error.message}" if error is not None else ""
        error = TrialError(type=ErrorType.MODEL_ERROR, message=f"every model call failed ({summary}){cause}")
    note = "not counted: every model call failed"
    if outcome.reward is not None:
        note += f" (the verifier's reading, {outcome.reward:g}, stays in the trajectory)"
    return outcome.model_copy(
        update={
            "status": TrialStatus.FAILED,
            "error": error,
            "reward": None,
            "reward_note": note,
            "dimensions": {},
            "structured_result": False,
        }
    )
