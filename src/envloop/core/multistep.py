"""Harbor multi-step tasks: when a trial stops early, and how its steps' results become one reward.

Harbor's rules (its `multi_step_reward_strategy`):

- `mean` (the default): per key, the mean over the steps whose verifier produced a result, a key a
  step did not report counting as 0 for that step;
- `final`: the last step's result, as it is;
- a step whose primary reward is below its `min_reward` (a number), or any of whose keys is below its
  threshold (a table of key to number), ends the trial: later steps do not run.

One rule is envloop's own and stricter than Harbor's: a step whose verifier ran but produced no
result is not skipped in the mean (Harbor drops it, which would turn a crashed verifier into a
higher score). The trial then has no primary reward, and says which step left it unscored.
"""

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, Field

RewardStrategy = Literal["mean", "final"]


class StepResult(BaseModel):
    """One step's verifier result: its values (reward.txt as `reward`, or reward.json's keys)."""

    name: str
    values: dict[str, float] = Field(default_factory=dict)
    note: str | None = Field(default=None, description="why the step has no result, when it has none")


class RolledUp(BaseModel):
    reward: float | None
    dimensions: dict[str, float]
    note: str | None


def step_values(reward: float | None, dimensions: Mapping[str, float]) -> dict[str, float]:
    """A step's values as Harbor sees them: reward.json's keys, else reward.txt's number."""
    if dimensions:
        return dict(dimensions)
    return {} if reward is None else {"reward": reward}


def primary(values: Mapping[str, float]) -> float | None:
    """The primary-reward rule applied to rolled-up values: `reward`, else the only key."""
    if "reward" in values:
        return values["reward"]
    return next(iter(values.values())) if len(values) == 1 else None


def below_minimum(values: Mapping[str, float], minimum: float | Mapping[str, float] | None) -> str | None:
    """Why a step's result misses its `min_reward` (then the trial stops), or None."""
    if minimum is None:
        return None
    if isinstance(minimum, int | float):
        reward = primary(values)
        if reward is None or reward < minimum:
            return f"reward {'none' if reward is None else format(reward, 'g')} below min_reward {minimum:g}"
        return None
    for key, threshold in minimum.items():
        value = values.get(key, 0.0)
        if value < threshold:
            return f"{key} {value:g} below min_reward {threshold:g}"
    return None


def roll_up(strategy: RewardStrategy, steps: Sequence[StepResult]) -> RolledUp:
    """The trial's reward and dimensions from the results of the steps that ran, in order."""
    if not steps:
        return RolledUp(reward=None, dimensions={}, note="no step ran")
    unscored = next((s for s in steps if not s.values), None)
    if unscored is not None:
        why = f"step {unscored.name!r} has no reward ({unscored.note or 'no reason given'})"
        return RolledUp(reward=None, dimensions={}, note=why)
    if strategy == "final":
        values = dict(steps[-1].values)
    else:
        keys = sorted({key for step in steps for key in step.values})
        values = {key: sum(step.values.get(key, 0.0) for step in steps) / len(steps) for key in keys}
    reward = primary(values)
    note = None if reward is not None else "the steps' results have several keys and no `reward`"
    # Values from reward.txt alone are the reward itself, not dimensions (as for one step).
    return RolledUp(reward=reward, dimensions={} if set(values) == {"reward"} else values, note=note)
