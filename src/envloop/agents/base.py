"""The Agent protocol: whatever attempts the task inside the environment during the agent phase.

An agent only talks to the environment through its methods (`exec`, `snapshot`, files by the
paths a command sees); it never learns a host directory of the instance. What it keeps of its own
(command outputs, a CLI's stream) it writes into `logs_dir`, a directory of the worker that the
runner keeps as the agent's logs; the runner owns the timeout (it cancels the
agent, and `exec` kills the process tree on cancellation), the phase record and the status mapping.
An agent that talks to a model records its own steps in the trial's trajectory (`records_steps`);
for any other agent the runner records each command it runs.

An agent that must be installed first (the agent CLIs) does that in `setup`, the trial's
`agent_setup` phase: it runs before the agent phase under a timeout of its own (Harbor's 360 s by
default, `el job submit --agent-setup-timeout`), never charged to the agent's. What it made ready
reaches `run` as `AgentContext.setup`; a setup that fails or runs out of time leaves the trial
`failed` with `agent_setup_error` and unscored, since the agent never worked on the task.

An agent declares the profile params it reads as a pydantic model (`params_model`, see
`envloop.core.params`); the shell runner refuses a profile whose values do not fit it before the
trial starts, and the agent reads its typed values with `read_params`.
"""

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from envloop.core.params import ComponentParams, param
from envloop.core.status import ErrorType
from envloop.core.trajectory import StopReason, TrajectoryRecorder
from envloop.core.trial import TrialSpec
from envloop.environments.base import ExecResult
from envloop.environments.contract import Environment
from envloop.models.settings import ModelProtocol
from envloop.tasks.model import HarborTask

DEFAULT_MAX_STEPS = 30


class NoParams(ComponentParams):
    """The params of an agent that reads none."""


class StepBudgetParams(ComponentParams):
    """The params of an agent whose loop has a step budget."""

    MAX_STEPS: int | None = param(
        f"the step budget when the job gives no --max-steps (default {DEFAULT_MAX_STEPS})", ge=1
    )


class AgentInfo(BaseModel):
    """What the agent is, for listings and trajectories."""

    name: str
    description: str
    records_steps: bool = Field(
        default=False, description="writes its own model and tool steps into the trial's trajectory"
    )
    speaks_mcp: bool = Field(default=False, description="uses the task's MCP servers (agents/mcp.py)")
    steps_limited_by_gateway: bool = Field(
        default=False,
        description="has no step limit of its own: the model gateway refuses its model calls past the "
        "job's --max-steps, and the trial records that it stopped at the step limit",
    )
    calls_model_inside: ModelProtocol | None = Field(
        default=None,
        description="calls its model through the worker's model gateway, by this protocol unless the "
        "profile's MODEL_PROTOCOL names another: its MODEL_BASE_URL and MODEL_API_KEY are then the "
        "model gateway's and a token of the trial's own (runners/model_route.py), never the real key",
    )
    model_calls_from: Literal["environment", "worker"] = Field(
        default="environment",
        description="where that agent's model calls come from: inside the environment (the CLIs), "
        "which the gateway is then opened to, or the worker's own process (terminus-2), which is "
        "given the gateway's loopback address and opens nothing to the environment",
    )


class AgentResult(BaseModel):
    exit_code: int | None = 0
    error: str | None = Field(default=None, description="why the agent could not do its job at all")
    error_type: Literal[
        ErrorType.AGENT_ERROR, ErrorType.MODEL_ERROR, ErrorType.ENVIRONMENT_ERROR, ErrorType.AGENT_SETUP_ERROR
    ] = ErrorType.AGENT_ERROR
    stop_reason: StopReason | None = Field(
        default=None,
        description="why the agent's loop ended; an agent that reports one fails the trial only by `error`",
    )
    attempted: bool = Field(
        default=True,
        description="False when the agent never got to work on the task (no solution for the oracle, "
        "an agent that could not be installed): the verifier then does not run, and the trial has no "
        "reward, since a 0 would measure the agent's set-up, not its work",
    )


@dataclass(frozen=True)
class AgentSetup:
    """What an agent's setup phase made ready for its run: its installed tree, as the environment's
    commands see it."""

    inside: str


@dataclass
class AgentContext:
    """One agent phase: the environment, the task, the variables every agent command gets, and
    the worker's directory for the agent's own logs (`stdout_path`/`stderr_path` are in it)."""

    environment: Environment
    task: HarborTask
    spec: TrialSpec
    recorder: TrajectoryRecorder
    logs_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    model_gateway: bool = False
    """The spec's model endpoint is the worker's gateway, which records every model call as a step:
    an agent that reads its own calls from its output then records only its tool steps."""
    stdout_path: Path | None = None
    stderr_path: Path | None = None
    setup: AgentSetup | None = None
    """What the agent's setup phase made ready (`SetsUp`); None before it ran, or when the agent has
    no setup phase."""

    def log_path(self, name: str) -> Path:
        """A file of the agent's logs."""
        return self.logs_dir / name

    def max_steps(self, from_profile: int | None) -> int:
        """The step budget: the job's `--max-steps`, else the profile's MAX_STEPS, else the default."""
        if self.spec.max_steps is not None:
            return self.spec.max_steps
        return from_profile if from_profile is not None else DEFAULT_MAX_STEPS


class Agent(Protocol):
    info: AgentInfo

    @property
    def params_model(self) -> type[BaseModel]:
        """The profile params the agent reads (a `ComponentParams`; `AllParams` to receive them all)."""
        ...

    async def run(self, ctx: AgentContext) -> AgentResult: ...


@runtime_checkable
class SetsUp(Protocol):
    """An agent with a setup phase (see the module's docstring): what it made ready, or the failed
    trial's result (`attempted=False`). The runner owns its timeout and its phase record."""

    async def setup(self, ctx: AgentContext) -> AgentSetup | AgentResult: ...


CAPTURE_LIMIT = 1024 * 1024
"""Characters of one captured stream a trajectory keeps; the artifact file keeps all of it."""


def read_capture(path: Path | None, fallback: str = "", *, whole: bool = False) -> tuple[str, bool]:
    """A command's captured stream for the trajectory: (text, cut short), never through a symlink.

    `whole` says `fallback` already is the whole stream (a short output), so the file is not read."""
    if path is None or whole:
        return fallback, False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return fallback, False
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(CAPTURE_LIMIT * 4 + 1)
    text = data.decode("utf-8", errors="replace")
    if len(text) > CAPTURE_LIMIT or len(data) > CAPTURE_LIMIT * 4:
        return text[:CAPTURE_LIMIT], True
    return text, False


def read_outputs(
    stdout_path: Path | None, stderr_path: Path | None, result: ExecResult | None
) -> tuple[str, str, bool]:
    """A command's whole stdout and stderr for its trajectory step, and whether either was cut
    short; short outputs come from `result`, longer ones from their capture files."""
    if result is None:
        (stdout, out_cut), (stderr, err_cut) = read_capture(stdout_path), read_capture(stderr_path)
    else:
        stdout, out_cut = read_capture(stdout_path, result.stdout, whole=result.stdout_whole)
        stderr, err_cut = read_capture(stderr_path, result.stderr, whole=result.stderr_whole)
    return stdout, stderr, out_cut or err_cut
