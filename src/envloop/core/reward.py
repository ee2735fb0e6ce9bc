"""The primary-reward rule of SPEC section 1, and the grammar a verifier's reward files must follow.

Pure: it reads file contents, never files. The grammar (docs/guides/writing-tasks.md, "Reward files"):

- `reward.txt` holds one decimal number, optionally surrounded by white space: digits with an
  optional fraction and exponent (`1`, `0.25`, `.5`, `2.5e-1`, an optional sign). Nothing else is
  a number here, although Python would read it as one: no `_` separators (`1_0` is not 10), no
  `nan`, `inf`, hexadecimal or text around it.
- `reward.json` is one JSON object, flat, of at most `MAX_DIMENSIONS` keys (each at most
  `MAX_NAME_LENGTH` characters) whose values are JSON numbers.
- A primary reward lies in [`REWARD_MIN`, `REWARD_MAX`]; any other value of `reward.json` in
  [-`REWARD_MAX`, `REWARD_MAX`]: finite, and small enough that sums over a million attempts stay
  exact enough and never overflow.

A file that breaks the grammar is rejected as a whole: the reading carries no reward and no
dimensions, and `rejected` says why, which the runner turns into a `verifier_error` (a broken
verifier is not a low score). Files that follow the grammar but give no primary reward (neither
file, or a `reward.json` of several keys and no `reward`) are not errors: the trial is unscored,
with the reason in `note`.
"""

import json
import math
import re

from pydantic import BaseModel, Field

REWARD_MIN = 0.0
REWARD_MAX = 1_000_000.0
MAX_DIMENSIONS = 100
MAX_NAME_LENGTH = 200

_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class RewardReading(BaseModel):
    reward: float | None
    dimensions: dict[str, float] = Field(default_factory=dict)
    note: str | None = Field(default=None, description="why there is no primary reward, when there is none")
    rejected: str | None = Field(
        default=None, description="why the verifier's reward file breaks the grammar (a verifier error)"
    )


class _Rejected(ValueError):
    """A reward file that breaks the grammar; the message is the one-line reason."""


def reward_problem(value: float) -> str | None:
    """Why a primary reward is not acceptable (not finite, outside the range), or None."""
    if not math.isfinite(value):
        return f"{value} is not a finite number"
    if not REWARD_MIN <= value <= REWARD_MAX:
        return f"{value:g} is outside the accepted range {REWARD_MIN:g} to {REWARD_MAX:,.0f}"
    return None


def parse_reward(reward_txt: str | None, reward_json: str | None) -> RewardReading:
    """reward.txt's number, else reward.json["reward"], else the only key of reward.json."""
    try:
        dimensions = _json_dimensions(reward_json) if reward_json is not None else None
        primary = _txt_reward(reward_txt) if reward_txt is not None else None
    except _Rejected as exc:
        return RewardReading(reward=None, note=str(exc), rejected=str(exc))
    if primary is not None:
        return RewardReading(reward=primary, dimensions=dimensions or {})
    if dimensions is None:
        return RewardReading(reward=None, note="the verifier wrote neither reward.txt nor reward.json")
    if "reward" in dimensions:
        return _with_primary(dimensions["reward"], "reward", dimensions)
    if len(dimensions) == 1:
        name, value = next(iter(dimensions.items()))
        return _with_primary(value, name, dimensions)
    if not dimensions:
        return RewardReading(reward=None, note="reward.json is empty")
    note = f"reward.json has {len(dimensions)} keys and no 'reward' key: no primary reward"
    return RewardReading(reward=None, dimensions=dimensions, note=note)


def _with_primary(value: float, name: str, dimensions: dict[str, float]) -> RewardReading:
    problem = reward_problem(value)
    if problem is not None:
        reason = f"reward.json {name!r} is {problem}"
        return RewardReading(reward=None, note=reason, rejected=reason)
    return RewardReading(reward=value, dimensions=dimensions)


def _txt_reward(text: str) -> float:
    stripped = text.strip()
    if not _DECIMAL.fullmatch(stripped):
        shown = stripped[:60] + ("…" if len(stripped) > 60 else "")
        raise _Rejected(f"reward.txt is not a decimal number: {shown!r}")
    value = float(stripped)
    problem = reward_problem(value)
    if problem is not None:
        raise _Rejected(f"reward.txt is {problem}")
    return value + 0.0  # -0 reads as 0


def _json_dimensions(text: str) -> dict[str, float]:
    try:
        data = json.loads(text)
    except RecursionError:
        raise _Rejected("reward.json is nested too deeply: it must be a flat object") from None
    except json.JSONDecodeError as exc:
        raise _Rejected(f"reward.json is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise _Rejected(f"reward.json is not valid JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise _Rejected("reward.json is not a JSON object")
    if len(data) > MAX_DIMENSIONS:
        raise _Rejected(f"reward.json has {len(data)} keys; at most {MAX_DIMENSIONS} are accepted")
    dimensions: dict[str, float] = {}
    for name, value in data.items():
        if not 0 < len(name) <= MAX_NAME_LENGTH:
            raise _Rejected(f"reward.json has a key of {len(name)} characters (1 to {MAX_NAME_LENGTH})")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Rejected(f"reward.json {name[:60]!r} is not a number")
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not (math.isfinite(number) and -REWARD_MAX <= number <= REWARD_MAX):
            raise _Rejected(
                f"reward.json {name[:60]!r} is outside the accepted range "
                f"{-REWARD_MAX:,.0f} to {REWARD_MAX:,.0f}"
            )
        dimensions[name] = number + 0.0
    return dimensions
