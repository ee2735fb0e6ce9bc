"""A job's samples: one row per attempt with what it was asked, what was expected and what it
answered, filtered, searched, sorted and paged by the store."""

from typing import Literal

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

from envloop.core.lazy import LazyModel
from envloop.core.status import ErrorType, TrialStatus
from envloop.wire.request import REQUEST

SampleSort = Literal["attempt", "reward", "-reward", "duration", "-duration", "tokens", "-tokens"]
SAMPLE_SORTS: tuple[SampleSort, ...] = (
    "attempt",
    "reward",
    "-reward",
    "duration",
    "-duration",
    "tokens",
    "-tokens",
)
INVALIDATED = "invalidated"
SampleStatus = TrialStatus | Literal["invalidated"]
"""A trial status, or `invalidated` for attempts a user excluded."""
SAMPLE_STATUSES: tuple[str, ...] = (*(status.value for status in TrialStatus), INVALIDATED)
RewardFilter = Literal["any", "counted", "none"]
MAX_SAMPLE_PAGE = 500
EXCERPT_CHARS = 4000
"""How much of an input, target or output is kept for the list and its search: the start of it."""


class SampleQuery(LazyModel):
    """Which samples, in which order, which page. Every filter narrows; text search matches the
    task name, the input, the target, the output and the error or reward note, ignoring case."""

    # Built at import, as JobRequest is: FastAPI reads a parameter model as it builds its routes.
    model_config = ConfigDict(extra="forbid", defer_build=False)

    q: str | None = Field(
        default=None, max_length=200, pattern=r"^[^\x00]*$", description="text to search for"
    )
    status: SampleStatus | None = Field(
        default=None, description="a trial status, or `invalidated` for attempts excluded by a user"
    )
    profile: str | None = Field(default=None, max_length=300, description="a profile reference NAME@VERSION")
    reward: RewardFilter = Field(
        default="any", description="counted: attempts whose reward counts; none: attempts without one"
    )
    min_reward: float | None = Field(
        default=None, allow_inf_nan=False, description="counted rewards of at least this"
    )
    max_reward: float | None = Field(
        default=None, allow_inf_nan=False, description="counted rewards of at most this"
    )
    sort: SampleSort = Field(
        default="attempt",
        description="attempt: profile, task (dataset order), attempt; a leading - sorts descending; "
        "attempts without the value come last",
    )
    limit: int = Field(default=50, ge=1, le=MAX_SAMPLE_PAGE)
    offset: int = Field(default=0, ge=0)


class Sample(LazyModel):
    trial_id: str
    task: str
    profile: str
    attempt: int
    status: TrialStatus
    error_type: ErrorType | None
    invalidated: bool
    reward: float | None
    counted: bool = Field(description="the reward counts in the job's metrics")
    note: str | None = Field(description="why there is no reward, or the error, in one line")
    input: str | None = Field(
        description=f"the prompt, or the start of the instruction (first {EXCERPT_CHARS} characters)"
    )
    target: str | None = Field(description="the expected answer, where the task has one")
    output: str | None = Field(
        description="the final answer or the agent's last message (first characters); null until it finished"
    )
    input_tokens: int | None
    output_tokens: int | None
    duration_sec: float | None = Field(description="from start to finish of the trial")


class SamplePage(LazyModel):
    job_id: str
    total: int = Field(description="samples matching the query, on every page")
    offset: int
    samples: list[Sample]


@dataclass(config=REQUEST, frozen=True)
class JobSamples:
    job_id: str
    query: SampleQuery = Field(default_factory=SampleQuery)


__all__ = [
    "JobSamples",
    "Sample",
    "SamplePage",
    "SampleQuery",
]
