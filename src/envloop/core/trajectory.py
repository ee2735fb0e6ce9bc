"""A trial's trajectory: one ordered, typed record of what the model was asked, what it answered,
which tools ran with what result, how the working directory changed, and how the answer scored.

Steps are a discriminated union on `kind` (small pydantic models, each with its position and start
time), written once per trial as the artifact `trajectory.json` and read back by `el trial get
--steps` and the console's trace viewer. Secret values are masked when the file is written.

Mapping to Harbor's Agent Trajectory Interchange Format (ATIF-v1.7), done by
`envloop.trajectories.atif.to_atif`:

- trajectory: `trial_id`, `agent`, `runner`, `model` → `session_id`, `agent.name`,
  `agent.version`, `agent.model_name`; `usage` → `final_metrics` (`total_prompt_tokens`,
  `total_completion_tokens`, `total_cached_tokens`, `total_steps`); `stop_reason` → root `extra`.
- `system` and `user` steps → steps with that `source` and the text as `message`.
- `model` step → a `source: agent` step: `message`, `reasoning_content`, `model_name`,
  `tool_calls[]` (`tool_call_id`, `function_name`, `arguments`), `metrics` (`prompt_tokens`,
  `completion_tokens`, `cached_tokens`); request summary, stop, attempts, error, HTTP status,
  requested model and truncation under `extra`.
- `tool` step → an `observation.results[]` entry (`source_call_id`, `content`) of the agent step
  that made the call; command, exit code, streams and file changes under the entry's `extra`.
- `state`, `score`, `verifier` and `cut` steps → `source: system` steps carrying the record under
  `extra`.

envloop keeps its own shape because ATIF folds tool results into the calling step, while the trace
viewer needs each tool result and the environment state after it as steps of their own.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from envloop.core.clock import utc_now
from envloop.core.lazy import LazyModel

TRAJECTORY_SCHEMA: Literal["envloop.trajectory/v1"] = "envloop.trajectory/v1"
TRAJECTORY_FILE = "trajectory.json"

StopReason = Literal["done", "max_steps", "timeout", "length", "model_error"]
"""Why a trial's model loop ended: the model finished, the step budget ran out, the time limit
passed, the output token limit cut the answer, or the model endpoint failed."""


class Usage(LazyModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class ToolCall(LazyModel):
    """One call the model asked for. `arguments_error` says why the raw arguments were not a JSON object."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None
    arguments_error: str | None = None


class FileChange(LazyModel):
    """A file in the working directory that a step created, modified or deleted."""

    path: str = Field(description="relative to the working directory, with / separators")
    change: Literal["created", "modified", "deleted"]
    size: int | None = Field(default=None, description="bytes after the step; None when deleted")
    binary: bool = False
    diff: str | None = Field(default=None, description="unified diff, for text files")
    diff_truncated: bool = False


class _Step(LazyModel):
    index: int = Field(default=0, description="position in the trajectory, from 0")
    at: datetime = Field(default_factory=utc_now, description="when the step began")
    duration_ms: float | None = None


class SystemStep(_Step):
    kind: Literal["system"] = "system"
    text: str


class UserStep(_Step):
    kind: Literal["user"] = "user"
    text: str


class ModelRequestSummary(LazyModel):
    protocol: str
    endpoint: str
    model: str
    messages: int = Field(description="messages in the conversation sent, system prompt excluded")
    tools: list[str] = Field(default_factory=list, description="names of the tools offered")
    params: dict[str, Any] = Field(
        default_factory=dict, description="the settings in force: generation params, timeout, retries"
    )


class ModelStep(_Step):
    """One model call: what was asked, what came back (or the error), tokens, attempts."""

    kind: Literal["model"] = "model"
    request: ModelRequestSummary
    text: str = ""
    reasoning: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    stop: str | None = Field(default=None, description="end, tool_calls, length, refusal or other")
    finish_reason: str | None = None
    served_by: str | None = Field(default=None, description="the model the server says answered")
    response_id: str | None = None
    usage: Usage = Field(default_factory=Usage)
    attempts: int = 1
    error: str | None = None
    http_status: int | None = Field(
        default=None, description="the HTTP status the agent received (calls through the model gateway)"
    )
    requested_model: str | None = Field(
        default=None, description="the model the agent asked for, when the gateway sent the profile's instead"
    )
    truncated: bool = Field(
        default=False, description="text, reasoning or tool arguments were cut to the recording limit"
    )


class ToolStep(_Step):
    """A tool call's execution and the state of the working directory right after it."""

    kind: Literal["tool"] = "tool"
    call_id: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    command: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False
    error: str | None = Field(default=None, description="why the tool could not run at all")
    changes: list[FileChange] = Field(default_factory=list)


class StateStep(_Step):
    """Changes to the working directory not made by a recorded tool call (e.g. an agent command)."""

    kind: Literal["state"] = "state"
    note: str | None = None
    changes: list[FileChange] = Field(default_factory=list)


class ScoreStep(_Step):
    kind: Literal["score"] = "score"
    scorer: str
    expected: str
    answer: str
    reward: float | None
    """None when the scorer could not decide; `explanation` says why."""
    explanation: str


class VerifierStep(_Step):
    """A Harbor task's verifier run: its command, how it ended, and the reward it wrote (or why none)."""

    kind: Literal["verifier"] = "verifier"
    command: str
    exit_code: int | None = None
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False
    reward: float | None = None
    reward_note: str | None = Field(default=None, description="why there is no primary reward")
    dimensions: dict[str, float] = Field(default_factory=dict)


class CutStep(_Step):
    """Where steps were left out of the kept trajectory to hold it within its size cap (see
    `envloop.trajectories.caps`), or where one step too large to keep stood: how many, how large."""

    kind: Literal["cut"] = "cut"
    steps: int = Field(description="steps left out here")
    bytes: int = Field(description="their size as recorded, in bytes of JSON")
    note: str


Step = Annotated[
    SystemStep | UserStep | ModelStep | ToolStep | StateStep | ScoreStep | VerifierStep | CutStep,
    Field(discriminator="kind"),
]


class Trajectory(LazyModel):
    schema_version: Literal["envloop.trajectory/v1"] = TRAJECTORY_SCHEMA
    trial_id: str
    runner: str
    agent: str
    model: str | None = None
    protocol: str | None = None
    started_at: datetime
    ended_at: datetime | None = None
    stop_reason: StopReason | None = None
    usage: Usage = Field(default_factory=Usage)
    steps: list[Step] = Field(default_factory=list)


class TrajectoryRecorder:
    """Builds a trajectory step by step: numbers the steps and sums the model calls' tokens."""

    def __init__(
        self, trial_id: str, runner: str, agent: str, model: str | None = None, protocol: str | None = None
    ) -> None:
        self.trajectory = Trajectory(
            trial_id=trial_id,
            runner=runner,
            agent=agent,
            model=model,
            protocol=protocol,
            started_at=utc_now(),
        )

    def add(self, step: Step) -> Step:
        step.index = len(self.trajectory.steps)
        self.trajectory.steps.append(step)
        if isinstance(step, ModelStep):
            self.trajectory.usage = self.trajectory.usage + step.usage
        return step

    def merge(self, steps: Sequence[Step], since: int) -> None:
        """Add steps recorded elsewhere (the model gateway's calls) among those from `since` on,
        in the order they began, and number them all again."""
        if not steps:
            return
        tail = sorted([*self.trajectory.steps[since:], *steps], key=lambda step: step.at)
        del self.trajectory.steps[since:]
        for step in tail:
            step.index = len(self.trajectory.steps)
            self.trajectory.steps.append(step)
        for step in steps:
            if isinstance(step, ModelStep):
                self.trajectory.usage = self.trajectory.usage + step.usage

    def finish(self, stop_reason: StopReason | None) -> Trajectory:
        self.trajectory.stop_reason = stop_reason
        self.trajectory.ended_at = utc_now()
        return self.trajectory


def usage_totals(trajectory: Trajectory) -> dict[str, int]:
    """The trial's `usage` record: model calls, the calls that failed (they carry an error), HTTP
    retries and tokens, zero counts left out. What the verdict on model failures reads
    (`core.model_failures`)."""
    calls = [s for s in trajectory.steps if isinstance(s, ModelStep)]
    totals = {
        "calls": len(calls),
        "failed_calls": sum(1 for s in calls if s.error is not None),
        "retries": sum(s.attempts - 1 for s in calls),
        **trajectory.usage.model_dump(),
    }
    return {k: v for k, v in totals.items() if v or k == "calls"}
