"""A model that never answered leaves no reward (SPEC section 7: a failure of the model, every call
refused or failed, is a `model_error` without a reward, for every agent, never a reward of 0).

The shell runner still runs the verifier after an agent's model failed, because a model that failed
part-way may have let the agent do real work first, which the verifier judges. When the model never
answered at all, the verifier can only judge an untouched workspace: its 0 measures the endpoint
(a missing key, a wrong model name), not the model, and counting it would let a job whose every
call was refused read as fully scored. The worker applies this rule to every outcome it records,
whatever the runner or executor, from the trajectory the run kept.
"""

from pathlib import Path

from pydantic import ValidationError

from envloop.core.trajectory import TRAJECTORY_FILE, ModelStep
from envloop.core.trial import TrialOutcome
from envloop.trajectories.files import read_trajectory

NEVER_ANSWERED = "the model never answered (every call failed): the verifier's verdict is not counted"


def without_unanswered_reward(outcome: TrialOutcome, artifacts_dir: Path) -> TrialOutcome:
    """The outcome, without its reward and dimensions when its agent's model never answered."""
    if outcome.error is None or outcome.error.type != "model_error":
        return outcome
    if outcome.reward is None and not outcome.dimensions:
        return outcome
    try:
        trajectory = read_trajectory(artifacts_dir / TRAJECTORY_FILE)
    except (OSError, ValidationError):
        return outcome  # no record of the calls: nothing says the model never answered
    calls = [step for step in trajectory.steps if isinstance(step, ModelStep)]
    if not calls or any(step.error is None for step in calls):
        return outcome
    return outcome.model_copy(update={"reward": None, "dimensions": {}, "reward_note": NEVER_ANSWERED})
