"""The primary-reward rule of SPEC section 1, on file contents only (no I/O)."""

import json
import math

from pydantic import BaseModel, Field


class RewardReading(BaseModel):
    reward: float | None
    dimensions: dict[str, float] = Field(default_factory=dict)
    note: str | None = Field(default=None, description="why there is no primary reward, when there is none")


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def parse_reward(reward_txt: str | None, reward_json: str | None) -> RewardReading:
    """reward.txt's number, else reward.json["reward"], else the only key of reward.json.

    NaN, infinities and unparsable content mean no reward; the reason is kept so a user can tell a
    broken verifier from a low score.
    """
    dimensions: dict[str, float] = {}
    json_note: str | None = None
    if reward_json is not None:
        try:
            data = json.loads(reward_json)
        except json.JSONDecodeError as exc:
            data = None
            json_note = f"reward.json is not valid JSON ({exc.msg} at line {exc.lineno})"
        if data is not None and not isinstance(data, dict):
            json_note = "reward.json is not a JSON object"
        elif isinstance(data, dict):
            for key, value in data.items():
                number = _finite(value)
                if number is not None:
                    dimensions[str(key)] = number
            json_note = _primary_from_json(data, dimensions)

    if reward_txt is not None:
        text = reward_txt.strip()
        try:
            number = float(text)
        except ValueError:
            return RewardReading(
                reward=None, dimensions=dimensions, note=f"reward.txt is not a number: {text[:60]!r}"
            )
        if not math.isfinite(number):
            return RewardReading(reward=None, dimensions=dimensions, note=f"reward.txt is not finite: {text}")
        return RewardReading(reward=number, dimensions=dimensions)

    if reward_json is None:
        return RewardReading(reward=None, note="the verifier wrote neither reward.txt nor reward.json")
    if json_note is not None:
        return RewardReading(reward=None, dimensions=dimensions, note=json_note)
    primary = dimensions.get("reward")
    if primary is None and len(dimensions) == 1:
        primary = next(iter(dimensions.values()))
    return RewardReading(reward=primary, dimensions=dimensions)


def _primary_from_json(data: dict[str, object], dimensions: dict[str, float]) -> str | None:
    if "reward" in data:
        if "reward" in dimensions:
            return None
        return f"reward.json 'reward' is not a finite number: {data['reward']!r}"
    if len(data) == 1:
        key = next(iter(data))
        return None if key in dimensions else f"reward.json {key!r} is not a finite number"
    if not data:
        return "reward.json is empty"
    return f"reward.json has {len(data)} keys and no 'reward' key: no primary reward"
