"""What every operation's request shares (a frozen pydantic dataclass, built on first use), and the
requests of the operations that need only what they act on.

A request is a dataclass rather than a model so that its constructor takes the operation's
parameters in order, as the method of the same name on every client does (`get_job("job_…")`).
"""

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass

REQUEST = ConfigDict(defer_build=True)


@dataclass(config=REQUEST, frozen=True)
class NoArguments:
    """An operation on the calling project as a whole (a list of everything)."""


@dataclass(config=REQUEST, frozen=True)
class JobId:
    job_id: str


@dataclass(config=REQUEST, frozen=True)
class TrialId:
    trial_id: str


@dataclass(config=REQUEST, frozen=True)
class Ref:
    ref: str
