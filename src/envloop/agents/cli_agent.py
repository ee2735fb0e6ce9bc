"""What the agent CLIs that speak to an OpenAI-compatible endpoint share: their params, their setup
phase (the install from the worker's cache, `install_cli`), the start of their agent phase (the
instruction step, the installed tree the setup made ready), one run of the CLI with
its output kept in the agent's logs (for a CLI that streams events, read into steps as well), and the
working directory's changes.

`CliAgent` is that shape as a template: its `setup` and `run` are the same for every CLI, and a CLI
module (codex.py, opencode.py, qwen_code.py, gemini_cli.py, mini_swe_agent.py, aider.py) gives only
its params, its recipe (how its CLI is installed) and `drive`, which configures and starts the CLI
and turns the CLI's own record of the run into steps. A CLI that streams JSON events on stdout
derives from `StreamingCliAgent` and gives `launch` instead: its argv, its variables (configuration
files written) and the reader of its stream. The record becomes tool steps, and model steps too
unless the worker's model gateway records the model calls (`AgentContext.model_gateway`): a model
call is never recorded twice.
"""

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Literal, Protocol, TypeVar

from envloop.agents.base import AgentContext, AgentInfo, AgentResult, AgentSetup
from envloop.agents.provision import provision
from envloop.agents.recipes import NpmRecipe, PipRecipe
from envloop.core.params import ComponentParams, param, read_params, secret_param
from envloop.core.status import ErrorType
from envloop.core.trajectory import ModelRequestSummary, StateStep, StopReason, UserStep
from envloop.environments.base import ExecResult
from envloop.models.settings import HttpUrlText
from envloop.trajectories import Snapshot, changes_between

VERSION_PATTERN = r"^[0-9A-Za-z][0-9A-Za-z.+-]{0,63}$"


def version_param(package: str, default: str) -> str:
    return param(  # type: ignore[no-any-return]
        f"the {package} version to run (installed once per worker into its agent cache)",
        default=default,
        pattern=VERSION_PATTERN,
        expect=f"a version such as {default}",
    )


class OpenAICliParams(ComponentParams):
    """An OpenAI-compatible endpoint, as the model gateway (or a profile) gives it to a CLI."""

    MODEL_PROTOCOL: Literal["openai"] | None = param(
        "the protocol: this agent speaks openai only", expect="openai (this agent speaks the OpenAI API)"
    )
    MODEL_BASE_URL: HttpUrlText = param(
        "the endpoint's URL ending in /v1", default=..., expect="an http:// or https:// URL"
    )
    MODEL_NAME: str = param("the model the CLI asks for", default=...)
    MODEL_API_KEY: str | None = secret_param("the endpoint's credential (the gateway's per-trial token)")
    AGENT_VERSION: str

    def request_summary(
        self, settings: dict[str, object], protocol: str = "openai", tools: list[str] | None = None
    ) -> ModelRequestSummary:
        """What each model call the CLI's own record describes was asked with: the endpoint, the
        model, the CLI's version and its settings (the record holds no request of its own)."""
        return ModelRequestSummary(
            protocol=protocol,
            endpoint=self.MODEL_BASE_URL,
            model=self.MODEL_NAME,
            messages=1,
            tools=tools or [],
            params={"agent_version": self.AGENT_VERSION, **settings},
        )


P = TypeVar("P", bound=OpenAICliParams)


@dataclass
class CliStart(Generic[P]):
    """A CLI agent's phase once it may run: its params, its installed tree and the workdir's state."""

    params: P
    provisioned: AgentSetup
    before: Snapshot


async def install_cli(
    ctx: AgentContext, model: type[OpenAICliParams], recipe: NpmRecipe | PipRecipe
) -> AgentSetup | AgentResult:
    """A CLI agent's setup phase: its AGENT_VERSION installed (once per worker) and made visible
    inside the environment. No network is asked for: the install happens on the worker."""
    params, problems = read_params(model, ctx.spec.params)
    if params is None:
        return AgentResult(exit_code=None, error="; ".join(problems), attempted=False)
    return await provision(ctx, recipe, params.AGENT_VERSION)


async def start_cli(
    ctx: AgentContext, model: type[P], recipe: NpmRecipe | PipRecipe
) -> CliStart[P] | AgentResult:
    """Params and instruction step, then the installed tree: the one the setup phase made ready, or
    (an agent run without one) installed now, in the agent's time; the failed trial's result when
    one of them fails. The model is reached through the worker's gateway."""
    params, problems = read_params(model, ctx.spec.params)
    if params is None:
        return AgentResult(exit_code=None, error="; ".join(problems), attempted=False)
    ctx.recorder.trajectory.protocol = "openai"
    ctx.recorder.add(UserStep(text=ctx.task.instruction))
    provisioned = ctx.setup or await provision(ctx, recipe, params.AGENT_VERSION)
    if isinstance(provisioned, AgentResult):
        return provisioned
    return CliStart(params, provisioned, await ctx.environment.snapshot())


async def write_config(ctx: AgentContext, name: str, text: str) -> str:
    """Write a configuration file of the CLI where the agent reads but cannot change it (its
    directory belongs to root: a CLI that writes beside its configuration copies it first)."""
    path = f"{ctx.environment.visible.tmp}/envloop-agent/{name}"
    await ctx.environment.write_file(path, text.encode())
    return path


async def run_cli(
    ctx: AgentContext, argv: Sequence[str], env: Mapping[str, str], stdout: str, stderr: str
) -> ExecResult:
    """One run of the CLI with `bash -c`-free argv (the instruction comes from its file), its
    output streamed into the agent's logs as `stdout` and `stderr`."""
    return await ctx.environment.exec(
        list(argv),
        env={**ctx.env, **env},
        stdout_path=ctx.log_path(stdout),
        stderr_path=ctx.log_path(stderr),
    )


async def record_changes(ctx: AgentContext, before: Snapshot, label: str) -> None:
    """The working directory's changes over the whole run, as one state step (a CLI's own record
    does not say which of its tools changed which file)."""
    after = await ctx.environment.snapshot(before)
    changes = changes_between(before, after)
    if changes:
        ctx.recorder.add(StateStep(note=f"files {label} changed in the working directory", changes=changes))


class EventStream(Protocol):
    """A CLI's JSON event stream turned into trajectory steps, one line at a time."""

    def feed(self, line: str) -> None: ...

    def finish(self) -> tuple[StopReason | None, str | None]:
        """How the run ended by its record, and the endpoint's error if the record shows one."""
        ...


@dataclass
class StreamedRun:
    result: ExecResult
    stop: StopReason | None
    error: str | None


async def run_streaming_cli(
    ctx: AgentContext,
    started: CliStart[P],
    argv: Sequence[str],
    env: Mapping[str, str],
    label: str,
    events: EventStream,
) -> StreamedRun:
    """One run of a CLI that writes its event stream on stdout, kept as `{label}.jsonl` (stderr as
    `{label}.stderr.txt`). The stream becomes steps even when the run is cut short (a timeout, a
    cancelled trial), then the working directory's changes are recorded."""
    stream = f"{label}.jsonl"
    try:
        result = await run_cli(ctx, argv, env, stream, f"{label}.stderr.txt")
    finally:
        for line in read_lines(ctx.log_path(stream)):
            events.feed(line)
    await record_changes(ctx, started.before, label)
    stop, error = events.finish()
    return StreamedRun(result, stop, error)


def read_lines(path: Path) -> list[str]:
    """The lines of a log the CLI wrote (none when it wrote nothing)."""
    try:
        return path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def cli_result(result: ExecResult, stop: StopReason | None, error: str | None, label: str) -> AgentResult:
    """The agent's result from the CLI's exit and what its record said: the endpoint's error is a
    `model_error`; a run its record does not show ending fails with the CLI's last words."""
    if error is not None:
        return AgentResult(
            exit_code=result.exit_code, error=error, error_type=ErrorType.MODEL_ERROR, stop_reason=stop
        )
    if stop is None:
        if result.timed_out:
            return AgentResult(exit_code=None, error=f"{label} did not finish")
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
        why = lines[-1].strip()[:400] if lines else "no output on stderr"
        return AgentResult(
            exit_code=result.exit_code,
            error=f"{label} exited with code {result.exit_code} without finishing ({why})",
        )
    return AgentResult(exit_code=result.exit_code, stop_reason=stop)


class CliAgent(ABC, Generic[P]):
    """An agent CLI installed from the worker's agent cache (see the module's docstring): the setup
    phase installs `recipe` at the profile's AGENT_VERSION; the agent phase reads the params, records
    the instruction, then hands the CLI's run to `drive`."""

    info: AgentInfo
    params_model: type[P]
    recipe: NpmRecipe | PipRecipe
    """How the CLI is installed; its label names the CLI in logs and errors."""

    async def setup(self, ctx: AgentContext) -> AgentSetup | AgentResult:
        return await install_cli(ctx, self.params_model, self.recipe)

    async def run(self, ctx: AgentContext) -> AgentResult:
        started = await start_cli(ctx, self.params_model, self.recipe)
        if isinstance(started, AgentResult):
            return started
        return await self.drive(ctx, started)

    @abstractmethod
    async def drive(self, ctx: AgentContext, started: CliStart[P]) -> AgentResult:
        """Configure and run the CLI, turn its record into steps, and say how it ended."""


@dataclass
class CliLaunch:
    """How a streaming CLI is started: its argv, the variables it gets besides the agent's, and the
    reader its stdout is fed to."""

    argv: list[str]
    env: dict[str, str]
    events: EventStream


class StreamingCliAgent(CliAgent[P]):
    """A CLI that writes its JSON event stream on stdout (kept as `LABEL.jsonl`)."""

    turn_limit_exit: int | None = None
    """The exit code by which the CLI says its own turn limit ran out (with no result event)."""

    @abstractmethod
    async def launch(self, ctx: AgentContext, started: CliStart[P]) -> CliLaunch:
        """Write the CLI's configuration and say how it is started and how its stream is read."""

    async def drive(self, ctx: AgentContext, started: CliStart[P]) -> AgentResult:
        launch = await self.launch(ctx, started)
        label = self.recipe.label
        run = await run_streaming_cli(ctx, started, launch.argv, launch.env, label, launch.events)
        stop = run.stop
        if stop is None and self.turn_limit_exit is not None and run.result.exit_code == self.turn_limit_exit:
            stop = "max_steps"
        return cli_result(run.result, stop, run.error, label)
