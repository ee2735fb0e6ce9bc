"""What a runner is asked to do (TrialSpec) and what it reports back (TrialOutcome).

Runners never touch the store: they take a spec, run one attempt, and return an outcome that the
scheduler records exactly once. That keeps the execution path testable without a database.
"""

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StringConstraints

from envloop.core.destinations import Destinations
from envloop.core.lazy import LazyModel
from envloop.core.status import ErrorType, Phase, TrialStatus

TrialEndStatus = Literal[TrialStatus.COMPLETED, TrialStatus.FAILED, TrialStatus.CANCELLED]
SandboxMode = Literal["bwrap", "plain", "docker"]
VerifierEnvironment = Literal["task", "separate"]
"""Where verifiers run: as each task says (`task`), or every one in a fresh environment of the task's
image with only the working directory and declared artifacts carried over (`separate`)."""
BUILTIN_ENVIRONMENTS = ("local", "docker", "auto")
EnvironmentChoice = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,19}$")]
"""Where a Harbor task's commands run: `local` (this host's sandbox), `docker` (a container of the
task's image), `auto` (a container when the task's Dockerfile needs one and a Docker daemon
answers), or the name of an installed environment plugin."""


class TrialSpec(LazyModel):
    model_config = ConfigDict(frozen=True)

    job_id: str
    trial_id: str
    task_name: str
    attempt: int = Field(ge=1, description="1-based attempt number within (task, profile)")
    profile_ref: str
    runner: str
    params: dict[str, str] = Field(description="profile params with secret values resolved")
    secret_values: tuple[str, ...] = Field(default=(), description="values to mask in anything kept")
    task_dir: Path | None = Field(
        default=None, description="frozen copy of a Harbor task; runners copy from it, never write to it"
    )
    task_digest: str | None = Field(
        default=None,
        description="the digest `task_dir` is stored under when it is the store's own content-addressed "
        "copy, taken as its digest; None: computed from the files",
    )
    row: dict[str, Any] | None = Field(default=None, description="the JSONL row of a chat task")
    scorer: str | None = Field(default=None, description="the dataset's scorer, for chat tasks")
    instance_root: Path = Field(
        description="parent of the per-trial instance directory (removed at teardown)"
    )
    artifacts_dir: Path = Field(description="where kept files go: agent logs, verifier output")
    agent_timeout_sec: float | None = None
    verifier_timeout_sec: float | None = None
    agent_setup_timeout_sec: float | None = Field(
        default=None, description="the job's agent setup timeout; None: Harbor's default"
    )
    max_steps: int | None = None
    network: bool = False
    run: int = Field(
        default=1, ge=1, description="which run of the trial this is (its lease); each run has its own files"
    )
    environment: EnvironmentChoice = Field(
        default="local", description="where a Harbor task's commands run (EnvironmentChoice)"
    )
    builds_dir: Path | None = Field(
        default=None, description="where task image builds are recorded (the docker environment's cache)"
    )
    verifier_environment: VerifierEnvironment = Field(
        default="task", description="the job's (or the operator's) choice of where verifiers run"
    )

    @property
    def run_id(self) -> str:
        """Names this run's instance, cgroups and staged artifacts: a stale run of the same trial
        (its worker stalled or died) never shares them with the run that replaced it."""
        return f"{self.trial_id}.r{self.run}"


class TrialError(LazyModel):
    type: ErrorType
    message: str
    exit_code: int | None = None


class PhaseRecord(LazyModel):
    name: Phase
    started_at: datetime
    ended_at: datetime
    exit_code: int | None = None
    timed_out: bool = False


TAMPER_FLAG = "tamper"
"""Files the agent changed that a verifier may execute or read (detail: the category, such as
"python import path", "shell start-up file", "binary on PATH", "/tests", "/logs/verifier")."""
MODEL_ERRORS_FLAG = "model-errors"
"""Some of the trial's model calls failed ("3 of 7 model calls failed"); it is scored all the same."""
VERIFIER_RUNS_PARAM = "VERIFIER_RUNS"
"""The shell runner's param: how many times the verifier judges the final state the agent left."""
MAX_VERIFIER_RUNS = 20
VERIFIER_FLAKY_FLAG = "verifier-flaky"
"""The verifier gave the one final state it judged several times (the shell runner's VERIFIER_RUNS)
different verdicts (detail: each run's reward, in order)."""


class TrialFlag(LazyModel):
    """Something about a trial a reader of its reward should know. A flag never changes a reward
    by itself: an agent asked to install a package legitimately writes site-packages."""

    model_config = ConfigDict(frozen=True)

    kind: str = Field(
        min_length=1, max_length=40, description=f"what was seen: {TAMPER_FLAG}, {MODEL_ERRORS_FLAG}, …"
    )
    detail: str = Field(description="what exactly, in a few words")
    paths: list[str] = Field(default_factory=list, description="the files concerned, if any")


class TrialOutcome(LazyModel):
    status: TrialEndStatus
    error: TrialError | None = None
    reward: float | None = None
    reward_note: str | None = Field(default=None, description="why there is no primary reward")
    dimensions: dict[str, float] = Field(default_factory=dict)
    sandbox: SandboxMode | None = None
    sandbox_note: str | None = None
    phases: list[PhaseRecord] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    usage: dict[str, int] = Field(default_factory=dict, description="model calls and tokens, summed")
    stop_reason: str | None = Field(default=None, description="why an agent loop ended, where it has one")
    structured_result: bool = Field(
        default=False, description="the kept artifacts hold a declared structured result (result.json)"
    )
    flags: list[TrialFlag] = Field(default_factory=list)
    destinations: Destinations | None = Field(
        default=None, description="what the trial asked its egress proxy for; None where none observed it"
    )


def infrastructure_failure(message: str, phases: list[PhaseRecord] | None = None) -> TrialOutcome:
    """A trial that failed through no fault of its task, agent or verifier: run it again elsewhere."""
    error = TrialError(type=ErrorType.INFRASTRUCTURE_ERROR, message=message)
    return TrialOutcome(status=TrialStatus.FAILED, error=error, phases=phases or [])


def crashed(exc: Exception, phases: list[PhaseRecord] | None = None) -> TrialOutcome:
    """A run that raised where it should have returned an outcome: an infrastructure error naming
    the exception, with the phases it recorded before. Masking is the caller's, as for any outcome."""
    return infrastructure_failure(f"{type(exc).__name__}: {exc}", phases)
