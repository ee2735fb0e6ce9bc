"""Whether a job's oracle passes each task: the check a task author (or an operator trying a
stricter verifier, `--verifier-environment separate`) reads before trusting a dataset's verdicts.

An oracle that does not pass a task means its verifier (or its environment) is broken for that task
under the job's conditions: any agent's score there says nothing about the agent.
"""

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from envloop.core.metrics import MemberRow

ORACLE_AGENT = "oracle"


class OracleMiss(BaseModel):
    """A task its oracle did not pass, and what its attempts gave instead."""

    model_config = ConfigDict(frozen=True)

    task: str
    why: str


class OracleCheck(BaseModel):
    model_config = ConfigDict(frozen=True)

    passing: list[str]
    missed: list[OracleMiss]
    pending: list[str]
    """Tasks with an attempt still to run: neither passed nor missed yet."""

    def line(self) -> str:
        """`passes on 18 of 20 tasks` (tasks still running are not counted yet)."""
        decided = len(self.passing) + len(self.missed)
        waiting = f" ({len(self.pending)} still running)" if self.pending else ""
        return f"passes on {len(self.passing)} of {decided} tasks{waiting}"


def check_oracle(rows: list[MemberRow]) -> OracleCheck:
    """A task passes when every attempt was scored 1; one still waiting leaves it pending; anything
    else is a miss that names what the attempts gave (a reward below 1, or why none was scored)."""
    passing: list[str] = []
    missed: list[OracleMiss] = []
    pending: list[str] = []
    for row in rows:
        if any(attempt in ("waiting", "undispatched") for attempt in row.attempts):
            pending.append(row.task)
        elif all(attempt == 1.0 for attempt in row.attempts):
            passing.append(row.task)
        else:
            missed.append(OracleMiss(task=row.task, why=_why(row.attempts)))
    return OracleCheck(passing=passing, missed=missed, pending=pending)


def _why(attempts: Sequence[float | str]) -> str:
    """`reward 0`, `reward 0.5, no reward: invalid`: each distinct outcome once, in attempt order."""
    seen: list[str] = []
    for attempt in attempts:
        said = f"no reward: {attempt}" if isinstance(attempt, str) else f"reward {attempt:g}"
        if said not in seen and attempt != 1.0:
            seen.append(said)
    return ", ".join(seen)
