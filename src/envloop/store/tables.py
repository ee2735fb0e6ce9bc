"""Tables of the store. Migrations in `migrations/versions` must match these definitions.

Times that workers compare (leases, heartbeats) are epoch seconds as floats so SQLite and PostgreSQL
compare them identically; times shown to users are timezone-aware UTC datetimes.
"""

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from envloop.core.clock import utc_now
from envloop.core.status import ErrorType, JobStatus, TrialStatus


class UTCDateTime(TypeDecorator[datetime]):
    """Stores UTC; always returns aware datetimes (SQLite drops the zone otherwise)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def words_of(kind: type[StrEnum], length: int) -> Enum:
    """A column holding one of `kind`'s values as the plain word (VARCHAR, no database enum type):
    stores written before the enum existed read the same, and writing any other word fails."""
    return Enum(
        kind,
        native_enum=False,
        create_constraint=False,
        validate_strings=True,
        values_callable=lambda members: [m.value for m in members],
        length=length,
    )


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Project(Base):
    __tablename__ = "projects"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)


class Dataset(Base):
    """One frozen revision: NAME@VERSION."""

    __tablename__ = "datasets"
    __table_args__ = (
        UniqueConstraint("project_id", "name", "version", name="uq_dataset_version"),
        UniqueConstraint("project_id", "name", "content_digest", name="uq_dataset_content"),
    )
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id"))
    name: Mapped[str] = mapped_column(String(200))
    version: Mapped[int] = mapped_column(Integer)
    runner: Mapped[str] = mapped_column(String(100))
    kind: Mapped[str] = mapped_column(String(20))
    scorer: Mapped[str | None] = mapped_column(String(200))
    content_digest: Mapped[str] = mapped_column(String(80))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)


class DatasetMember(Base):
    __tablename__ = "dataset_members"
    __table_args__ = (UniqueConstraint("dataset_id", "name", name="uq_member_name"),)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    digest: Mapped[str] = mapped_column(String(80))
    row: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    """The JSONL row itself for model-only sets; Harbor tasks live in the artifact store by digest."""
    requires: Mapped[list[Any]] = mapped_column(JSON, default=list)
    """Variables the task's env sections reference as ${NAME}; each profile must provide them."""
    features: Mapped[list[Any] | None] = mapped_column(JSON, default=None)
    """Task features some environment does not honour (environments/features.py), found at push;
    None for members pushed before they were recorded."""


class Profile(Base):
    __tablename__ = "profiles"
    __table_args__ = (UniqueConstraint("project_id", "name", "version", name="uq_profile_version"),)
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id"))
    name: Mapped[str] = mapped_column(String(200))
    version: Mapped[str] = mapped_column(String(100))
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    """Non-secret params only; secret values live in profile_secrets."""
    secret_names: Mapped[list[Any]] = mapped_column(JSON)
    content_digest: Mapped[str] = mapped_column(String(80))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)


class ProfileSecret(Base):
    __tablename__ = "profile_secrets"
    profile_id: Mapped[str] = mapped_column(ForeignKey("profiles.id"), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("project_id", "request_id", name="uq_job_request"),
        Index("ix_jobs_project_created", "project_id", "created_at"),
    )
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id"))
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"))
    runner: Mapped[str] = mapped_column(String(100))
    attempts: Mapped[int] = mapped_column(Integer)
    status: Mapped[JobStatus] = mapped_column(words_of(JobStatus, 20), default=JobStatus.PENDING)
    concurrency: Mapped[int | None] = mapped_column(Integer)
    max_steps: Mapped[int | None] = mapped_column(Integer)
    agent_timeout_sec: Mapped[float | None] = mapped_column(Float)
    verifier_timeout_sec: Mapped[float | None] = mapped_column(Float)
    agent_setup_timeout_sec: Mapped[float | None] = mapped_column(Float, default=None)
    """The job's `--agent-setup-timeout`; None: Harbor's default (runners/shell_phases.py)."""
    environment: Mapped[str | None] = mapped_column(String(20))
    """local, docker or auto; None: each worker's own choice (`el worker --environment`)."""
    skip_unsupported: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """Submitted to leave out the tasks whose features its environment cannot honour."""
    verifier_environment: Mapped[str] = mapped_column(String(20), default="task", server_default="task")
    """task or separate (VerifierEnvironment): where the job's verifiers run."""
    skipped: Mapped[list[Any] | None] = mapped_column(JSON, default=None)
    """The tasks left out at submission, each {"task", "reason"}; they have no trials."""
    tasks: Mapped[list[Any]] = mapped_column(JSON)
    """Selected member names, in dataset order."""
    tags: Mapped[dict[str, Any]] = mapped_column(JSON)
    name: Mapped[str | None] = mapped_column(String(200), default=None)
    """What the submitter calls the run (`--name`), shown beside its ID in lists."""
    note: Mapped[str | None] = mapped_column(Text, default=None)
    """Why the run was made or what changed (`--note`)."""
    request_id: Mapped[str | None] = mapped_column(String(200))
    request_digest: Mapped[str | None] = mapped_column(String(80))
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    claim_seq: Mapped[int] = mapped_column(Integer, default=0)
    result_version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Bumped whenever a finished job's result changes (a trial invalidated or restored)."""
    """Bumped by every claim so concurrent claimers serialize on the job row (per-job concurrency)."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class JobProfile(Base):
    __tablename__ = "job_profiles"
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    profile_id: Mapped[str] = mapped_column(ForeignKey("profiles.id"))


class Trial(Base):
    __tablename__ = "trials"
    __table_args__ = (
        UniqueConstraint("job_id", "profile_id", "task_name", "attempt", name="uq_trial_slot"),
        Index("ix_trials_queue", "status", "job_id"),
        Index("ix_trials_job", "job_id", "profile_id", "member_position", "attempt"),
        Index("ix_trials_job_status", "job_id", "status", "attempt", "member_position"),
        Index("ix_trials_lease", "status", "lease_expires_at"),
    )
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"))
    profile_id: Mapped[str] = mapped_column(ForeignKey("profiles.id"))
    task_name: Mapped[str] = mapped_column(String(200))
    task_digest: Mapped[str] = mapped_column(String(80))
    member_position: Mapped[int] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer)
    status: Mapped[TrialStatus] = mapped_column(words_of(TrialStatus, 20), default=TrialStatus.PENDING)
    error_type: Mapped[ErrorType | None] = mapped_column(words_of(ErrorType, 40))
    error_message: Mapped[str | None] = mapped_column(Text)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    reward: Mapped[float | None] = mapped_column(Float)
    reward_note: Mapped[str | None] = mapped_column(Text)
    dimensions: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    sandbox: Mapped[str | None] = mapped_column(String(20))
    sandbox_note: Mapped[str | None] = mapped_column(Text)
    warnings: Mapped[list[Any]] = mapped_column(JSON, default=list)
    phases: Mapped[list[Any]] = mapped_column(JSON, default=list)
    usage: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    """Model token usage summed over the trial (calls, input_tokens, output_tokens)."""
    stop_reason: Mapped[str | None] = mapped_column(String(40))
    structured_result: Mapped[bool] = mapped_column(Boolean, default=False)
    """Whether the kept artifacts hold a result.json, so results read only the trials that have one."""
    flags: Mapped[list[Any]] = mapped_column(JSON, default=list, server_default="[]")
    """What a reader of the reward should know (`core.trial.TrialFlag`: kind, detail, paths)."""
    destinations: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    """What the trial asked its egress proxy for (`core.destinations.Destinations`); None where no
    proxy observed its network. Read for one trial's view, never for lists."""
    lease_owner: Mapped[str | None] = mapped_column(String(64))
    lease_token: Mapped[int] = mapped_column(Integer, default=0)
    """Incremented by every claim: only the holder of the current token may record the result."""
    lease_expires_at: Mapped[float | None] = mapped_column(Float)
    runs: Mapped[int] = mapped_column(Integer, default=0)
    """How many times the trial was claimed (>1 means a worker died and it was re-run)."""
    invalidated: Mapped[bool] = mapped_column(Boolean, default=False)
    invalidated_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class TaskFacts(Base):
    """What a task asks, expects and is labelled with, by content digest: read once from the frozen
    task (a JSONL row's prompt, answer and metadata; a Harbor task's instruction and task.toml
    `[metadata]`), so a job's samples can be searched and its results broken down in the store."""

    __tablename__ = "task_facts"
    digest: Mapped[str] = mapped_column(String(80), primary_key=True)
    input: Mapped[str] = mapped_column(Text)
    """The start of the prompt or instruction."""
    target: Mapped[str | None] = mapped_column(Text)
    """The start of the expected answer, where the task has one (JSONL rows)."""
    labels: Mapped[dict[str, Any]] = mapped_column(JSON)
    """The task's metadata: a JSONL row's `metadata`, a Harbor task's `[metadata]`."""


class TrialSample(Base):
    """A finished trial's answer, tokens and duration as a job's samples list shows them: read once
    from its kept trajectory (or its agent's output) the first time the list is read after it ended."""

    __tablename__ = "trial_samples"
    trial_id: Mapped[str] = mapped_column(ForeignKey("trials.id"), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    output: Mapped[str | None] = mapped_column(Text)
    tokens: Mapped[int | None] = mapped_column(Integer)
    """Input and output tokens of the trial's model calls, for sorting."""
    duration_sec: Mapped[float | None] = mapped_column(Float)


class Worker(Base):
    __tablename__ = "workers"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    host: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int] = mapped_column(Integer)
    capacity: Mapped[int] = mapped_column(Integer)
    background: Mapped[bool] = mapped_column(Boolean, default=False)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)
    heartbeat_at: Mapped[float] = mapped_column(Float)


class LeaderboardRow(Base):
    """A saved snapshot of one (job, profile) on the project board; adding again returns it."""

    __tablename__ = "leaderboard_rows"
    __table_args__ = (
        UniqueConstraint("project_id", "job_id", "profile_id", name="uq_leaderboard_entry"),
        Index("ix_leaderboard_board", "project_id", "board_key"),
    )
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id"))
    board_key: Mapped[str] = mapped_column(String(80))
    """Digest of the compatibility key: dataset revision, runner, task names and digests, attempts."""
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"))
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"))
    profile_id: Mapped[str] = mapped_column(ForeignKey("profiles.id"))
    snapshot: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)


class ApiKey(Base):
    """A per-project API key; only its hash is stored."""

    __tablename__ = "api_keys"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id"))
    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(20), index=True)
    key_hash: Mapped[str] = mapped_column(String(128), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class ConsoleSession(Base):
    """A console login: the browser's cookie holds a random token, stored here only as its hash.
    A session lasts until it expires, its user logs out, or its API key is revoked."""

    __tablename__ = "console_sessions"
    token_hash: Mapped[str] = mapped_column(String(128), primary_key=True)
    api_key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class ShareLink(Base):
    """Read-only access to one job through a token (stored hashed), or publicly."""

    __tablename__ = "share_links"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id"))
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    token_hash: Mapped[str] = mapped_column(String(128), unique=True)
    public: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
