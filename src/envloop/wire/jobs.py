"""Jobs on the wire: what a submission asks for, and how a job reads back."""

import json
from datetime import datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError
from pydantic.dataclasses import dataclass

from envloop.core.lazy import LazyModel
from envloop.core.nesting import NestedTooDeepError, load_json
from envloop.core.status import TERMINAL, JobStatus, TrialStatus
from envloop.core.trial import EnvironmentChoice, VerifierEnvironment
from envloop.errors import UserError
from envloop.wire.request import REQUEST, QueryForm

MAX_ATTEMPTS = 1000
MAX_PAGE = 1000
"""The most jobs one page of the list holds."""
MAX_NOTE = 4000

JOB_CONFIG_SCHEMA = "envloop.job/v1"


class JobRequest(LazyModel):
    """What a submission asks for. `el job export` writes exactly this (with the concrete revision)."""

    # Built at import: FastAPI reads a request body's model as it builds its routes, and a deferred
    # one makes it attach the parameter's alias where pydantic ignores it (with a warning).
    model_config = ConfigDict(extra="forbid", defer_build=False)

    schema_version: str = JOB_CONFIG_SCHEMA
    dataset: str
    profiles: list[str] = Field(min_length=1)
    attempts: int = Field(default=1, ge=1, le=MAX_ATTEMPTS)
    tasks: list[str] | None = None
    max_steps: int | None = Field(default=None, ge=1)
    concurrency: int | None = Field(default=None, ge=1)
    agent_timeout_sec: float | None = Field(default=None, gt=0)
    verifier_timeout_sec: float | None = Field(default=None, gt=0)
    agent_setup_timeout_sec: float | None = Field(
        default=None,
        gt=0,
        description="seconds for installing the agent (its setup phase, never charged to the agent's "
        "timeout); unset, Harbor's 360",
    )
    environment: EnvironmentChoice | None = Field(
        default=None,
        description="where Harbor tasks run: local (this host's sandbox), docker (a container of the "
        "task's image) or auto; unset, each worker's own choice (local unless it was started otherwise)",
    )
    skip_unsupported: bool = Field(
        default=False,
        description="leave out (rather than refuse the job for) the tasks needing a feature the "
        "environment choice cannot honour; the job records which and why, and they get no trials",
    )
    verifier_environment: VerifierEnvironment = Field(
        default="task",
        description="task: each verifier runs where its task says; separate: in a fresh container of the "
        "task's image with only the working directory and declared artifacts carried over",
    )
    tags: dict[str, str] = Field(default_factory=dict)
    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=r"^[^\x00-\x1f\x7f]+$",
        description="what to call the run in lists (--name): one line of text",
    )
    note: str | None = Field(
        default=None, min_length=1, max_length=MAX_NOTE, description="why the run was made (--note)"
    )
    request_id: str | None = Field(default=None, min_length=1, max_length=200)


def parse_job_config(raw: str, source: str) -> JobRequest:
    """A job configuration file (`el job export` writes one) read as a request; `source` names it
    in the one-line error a malformed file gets."""
    try:
        data = load_json(raw)
    except json.JSONDecodeError as exc:
        raise UserError(f"{source}: not valid JSON ({exc})") from None
    except NestedTooDeepError as exc:
        raise UserError(f"{source}: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a JSON object")
    return parse_job_config_dict(data, source)


def parse_job_config_dict(data: dict[str, object], source: str = "request") -> JobRequest:
    """A request from its fields, refused in one line naming the first field that is wrong. Here,
    beside the model, so a client (`el job submit` against a server) checks a request without the
    service layer and the store behind it."""
    try:
        request = JobRequest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UserError(f"{source}: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
    if request.schema_version != JOB_CONFIG_SCHEMA:
        raise UserError(f"{source}: schema_version must be {JOB_CONFIG_SCHEMA!r}")
    return request


class SkippedTask(LazyModel):
    task: str
    reason: str


class JobView(LazyModel):
    id: str
    status: JobStatus
    dataset: str
    runner: str
    profiles: list[str]
    attempts: int
    tasks: list[str]
    concurrency: int | None
    max_steps: int | None
    agent_timeout_sec: float | None
    verifier_timeout_sec: float | None
    agent_setup_timeout_sec: float | None = None
    environment: EnvironmentChoice | None = None
    skip_unsupported: bool = False
    verifier_environment: VerifierEnvironment = "task"
    skipped: list[SkippedTask] = Field(
        default_factory=list, description="tasks left out at submission (--skip-unsupported), with why"
    )
    tags: dict[str, str]
    name: str | None = None
    note: str | None = None
    request_id: str | None
    cancel_requested: bool
    counts: dict[TrialStatus, int] = Field(description="trials by status")
    created_at: datetime
    finished_at: datetime | None


class JobProgress(LazyModel):
    """How far a job is: its status and trial counts, without its configuration or result."""

    id: str
    status: JobStatus
    cancel_requested: bool
    counts: dict[TrialStatus, int] = Field(description="trials by status")

    @property
    def done(self) -> int:
        return sum(self.counts[status] for status in TERMINAL)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class SubmitResult(LazyModel):
    job: JobView
    warnings: list[str]
    existing: bool = Field(description="True when the request ID matched an earlier identical submission")


@dataclass(config=REQUEST, frozen=True)
class SubmitJob:
    request: JobRequest


TagFilter = Annotated[str, StringConstraints(pattern="^[^=]+=")]


def _tag_strings(tags: dict[str, str]) -> list[str]:
    return [f"{key}={value}" for key, value in tags.items()]


def _tags_of_strings(value: Any) -> Any:
    """Tags from their query form, `key=value` strings (the route checked each has a key and `=`)."""
    if isinstance(value, list):
        return dict(item.partition("=")[::2] for item in value)
    return value


@dataclass(config=REQUEST, frozen=True)
class ListJobs:
    status: JobStatus | None = None
    tags: Annotated[
        dict[str, str] | None,
        BeforeValidator(_tags_of_strings),
        QueryForm("tag", list[TagFilter] | None, _tag_strings),
        Field(description="key=value; repeat to require several"),
    ] = None
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE, description="jobs per page")] = 50
    before: Annotated[
        str | None,
        Field(
            max_length=64,
            description="a job ID: the page of jobs created before it (pass the last ID of a page to "
            "get the next one)",
        ),
    ] = None


__all__ = [
    "JOB_CONFIG_SCHEMA",
    "MAX_ATTEMPTS",
    "MAX_PAGE",
    "JobProgress",
    "JobRequest",
    "JobView",
    "ListJobs",
    "SkippedTask",
    "SubmitJob",
    "SubmitResult",
]
