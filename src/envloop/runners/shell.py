"""`envloop/shell@1`: one Harbor task attempt, from environment setup to teardown.

setup → agent setup (installing the agent, for an agent that has one: its own timeout, never the
agent's) → agent (bounded by its timeout) → verifier (`bash /tests/test.sh`, its own timeout; it runs
even after the agent failed or timed out) → reward → artifacts → teardown (always). Every failure of
the trial itself becomes an outcome with an error type; only cancellation propagates, after the
environment has been torn down.

Every trial keeps one trajectory (`trajectory.json`, secrets masked): the agent's steps (a model
agent's own model and tool steps; for any other agent the instruction and each command it ran,
with its result and the working-directory changes), then the verifier's run with its reward.

The sandbox has no network (loopback only) unless the task asks for one or the profile sets
`NETWORK=public` for its agent phase; even then the trial gets a network of its own, never the
host's. An agent that calls its model from inside the sandbox reaches it through the worker's model
gateway (runners/model_route.py), which needs no network; `envloop` calls its model from the worker.

Before the verifier starts, every process the agent left is stopped; the verifier sees a fresh
copy of the tests and writes its reward into a directory the agent never had.
"""

import asyncio
import functools
import shutil
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from envloop.agents import AGENTS, Agent, AgentContext, find_agent
from envloop.agents.base import AgentResult
from envloop.agents.mcp import unspoken
from envloop.core.masking import mask_outcome, mask_text
from envloop.core.params import ComponentParams, ParamReader, param, params_schema
from envloop.core.status import ErrorType, Phase, TrialStatus
from envloop.core.trajectory import (
    ModelStep,
    StateStep,
    TrajectoryRecorder,
    UserStep,
    usage_totals,
)
from envloop.core.trial import (
    MAX_VERIFIER_RUNS,
    VERIFIER_FLAKY_FLAG,
    PhaseRecord,
    TrialError,
    TrialOutcome,
    TrialSpec,
)
from envloop.environments import Environment, EnvironmentProvider, EnvironmentSetupError
from envloop.environments.features import refuse_unsupported
from envloop.environments.keeping import keep_tree, move_plain_tree
from envloop.environments.shielded import finish_even_if_cancelled
from envloop.plugins import ComponentError
from envloop.runners.base import ComponentInfo, TaskKind
from envloop.runners.healthcheck import wait_healthy
from envloop.runners.model_route import ModelRoute, RouteRefused, close_route, open_route, without_model_key
from envloop.runners.params import check_params, missing_here
from envloop.runners.shell_multistep import agent_then_verifier, run_steps
from envloop.runners.shell_phases import (
    PhasePlan,
    agent_network,
    captures_dir,
    keep_phase_log,
    phase_plan,
    set_up_agent,
)
from envloop.runners.shell_steps import RecordingEnvironment
from envloop.tasks.harbor import load_harbor_task
from envloop.tasks.model import HarborTask
from envloop.tasks.phases import phase_networks
from envloop.trajectories.files import write_trajectory

NETWORK_PARAM = "NETWORK"


class ShellParams(ComponentParams):
    """The shell runner's own params; the agent AGENT_NAME names reads the others."""

    AGENT_NAME: str = param(
        "the agent: a built-in or plugin agent's name, or an allowed module:Name reference", default=...
    )
    NETWORK: Literal["none", "public", "host"] | None = param(
        "public (or its older name host): the agent phase gets a network of its own (an agent that "
        "installs itself at run time); none (default): the task's own. An agent reaches its model "
        "through the worker's gateway either way"
    )
    VERIFIER_RUNS: int | None = param(
        "how many times the verifier judges the final state the agent left (default 1): verdicts "
        f"that differ flag the trial {VERIFIER_FLAKY_FLAG}; each run after the first is kept under "
        "verifier-runs/N",
        ge=1,
        le=MAX_VERIFIER_RUNS,
    )


@functools.lru_cache(maxsize=256)
def _frozen_task(task_dir: Path, name: str) -> HarborTask:
    """Frozen task copies never change, so each is parsed (and its digest computed) once per process."""
    return load_harbor_task(task_dir, name=name)


INSTRUCTION_VARIABLE_LIMIT = 64 * 1024
_INLINE_ARTIFACT_ENTRIES = 64


def _now() -> datetime:
    return datetime.now(UTC)


class ShellRunner:
    ref = "envloop/shell@1"
    task_kind: TaskKind = "harbor"
    description = "Harbor tasks: an agent works in a local sandbox, then tests/test.sh writes the reward"

    def __init__(self, provider: EnvironmentProvider | None = None) -> None:
        self.provider = provider
        """The provider every trial uses; None: the one its spec names (`environment`)."""

    params_model = ShellParams

    def param_readers(self, params: Mapping[str, str]) -> list[ParamReader]:
        readers = [ParamReader(label=f"runner {self.ref}", model=ShellParams)]
        name = params.get("AGENT_NAME", "").strip()
        if name:
            agent = find_agent(name).component
            when = f" when AGENT_NAME={name}"
            readers.append(ParamReader(label=f"agent {name!r}", model=agent.params_model, when=when))
        return readers

    def components(self) -> list[ComponentInfo]:
        return [
            ComponentInfo(
                name=found.name,
                description=found.component.info.description,
                origin=found.origin,
                params_schema=params_schema(found.component.params_model),
            )
            for found in AGENTS.all()
        ]

    async def run(self, spec: TrialSpec) -> TrialOutcome:
        phases: list[PhaseRecord] = []
        if spec.params.get(NETWORK_PARAM, "").strip() in ("public", "host"):
            spec = spec.model_copy(update={"network": True})
        params = spec.params
        recorder = TrajectoryRecorder(
            spec.trial_id,
            self.ref,
            agent=params.get("AGENT_NAME", ""),
            model=params.get("MODEL_NAME"),
            protocol=params.get("MODEL_PROTOCOL"),
        )
        try:
            outcome = await self._run(spec, phases, recorder)
        except Exception as exc:
            message = mask_text(f"{type(exc).__name__}: {exc}", spec.secret_values)
            error = TrialError(type=ErrorType.INFRASTRUCTURE_ERROR, message=message)
            outcome = TrialOutcome(status=TrialStatus.FAILED, error=error, phases=phases)
        finally:
            trajectory = recorder.finish(recorder.trajectory.stop_reason)
            spec.artifacts_dir.mkdir(parents=True, exist_ok=True)
            await _keep_captures(spec)  # what collection did not reach (a failed or cancelled run)
            write_trajectory(spec.artifacts_dir, trajectory, spec.secret_values)
        outcome.stop_reason = trajectory.stop_reason
        if any(isinstance(step, ModelStep) for step in trajectory.steps):
            outcome.usage = usage_totals(trajectory)
        # Every field a verifier or agent could write into is masked, not only the kept files.
        return mask_outcome(outcome, spec.secret_values)

    async def _run(
        self, spec: TrialSpec, phases: list[PhaseRecord], recorder: TrajectoryRecorder
    ) -> TrialOutcome:
        name = spec.params.get("AGENT_NAME", "").strip()
        try:
            agent = find_agent(name).component if name else None
        except ComponentError as exc:
            # Submission found it, so it is this worker that lacks it: another may have it installed.
            return TrialOutcome(status=TrialStatus.FAILED, error=missing_here(exc))
        problems = check_params(self, spec.params)
        if problems or agent is None:
            error = TrialError(type=ErrorType.AGENT_ERROR, message="; ".join(problems))
            return TrialOutcome(status=TrialStatus.FAILED, error=error)
        # The environments (Docker's client among them) load with a worker's first trial, not for
        # the commands that only check a runner's params (`el profile create`, `el job submit`).
        from envloop.environments.choice import choose_provider  # noqa: PLC0415

        started = _now()
        context: AbstractAsyncContextManager[Environment] | None = None
        try:
            # A copy per trial: a multi-step trial moves its own copy from step to step.
            task = _frozen_task(spec.task_dir, spec.task_name).model_copy()
            provider, choice_warning = (
                (self.provider, None) if self.provider is not None else await choose_provider(task, spec)
            )
            # Never run a task without what it needs (push and submission refuse it too; this is
            # the last line for jobs that left the environment to the worker).
            feature_warnings = refuse_unsupported(task, getattr(provider, "honours", None))
            context = provider.instance(task, spec)
            environment = await context.__aenter__()
        except Exception as exc:
            phases.append(PhaseRecord(name=Phase.SETUP, started_at=started, ended_at=_now()))
            message = mask_text(f"environment setup failed: {exc}", spec.secret_values)
            error = TrialError(type=ErrorType.ENVIRONMENT_ERROR, message=message)
            return TrialOutcome(status=TrialStatus.FAILED, error=error, phases=phases)
        phases.append(PhaseRecord(name=Phase.SETUP, started_at=started, ended_at=_now()))
        environment.warnings.extend(feature_warnings)
        try:
            outcome = await self._attempt(environment, provider, task, spec, agent, phases, recorder)
        except EnvironmentSetupError as exc:
            # The environment failed the trial midway (a phase's network, a sidecar): its doing.
            message = mask_text(str(exc), spec.secret_values)
            error = TrialError(type=ErrorType.ENVIRONMENT_ERROR, message=message)
            outcome = TrialOutcome(status=TrialStatus.FAILED, error=error, phases=phases)
        except BaseException as exc:
            await context.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        started = _now()
        try:
            await context.__aexit__(None, None, None)
        except Exception as exc:
            outcome.warnings.append(f"teardown failed: {exc}")
        outcome.phases.append(PhaseRecord(name=Phase.TEARDOWN, started_at=started, ended_at=_now()))
        outcome.warnings.extend(environment.warnings)
        outcome.flags.extend(environment.flags)
        if choice_warning is not None:
            outcome.warnings.append(choice_warning)
        outcome.sandbox = environment.mode
        outcome.sandbox_note = environment.note
        return outcome

    async def _attempt(
        self,
        environment: Environment,
        provider: EnvironmentProvider,
        task: HarborTask,
        spec: TrialSpec,
        agent: Agent,
        phases: list[PhaseRecord],
        recorder: TrajectoryRecorder,
    ) -> TrialOutcome:
        keep_phase_log(spec, "setup", _setup_log(environment))
        check = task.config.environment.healthcheck
        if check is not None:
            report = await wait_healthy(
                environment, check, "[environment.healthcheck]", captures_dir(spec) / "healthcheck"
            )
            keep_phase_log(spec, "setup", _setup_log(environment) + "\n".join(report.lines) + "\n")
            if report.error is not None:
                await environment.stop()
                return TrialOutcome(status=TrialStatus.FAILED, error=report.error, phases=phases)
        if task.steps:
            return await run_steps(self, environment, provider, task, spec, agent, phases, recorder)
        plan = phase_plan(task, environment, spec)
        await environment.set_network(
            agent_network(phase_networks(task.config, default=environment.default_network).agent, spec),
            "agent",
        )
        reading, agent_error, verifier_error = await agent_then_verifier(
            self, environment, provider, task, None, spec, agent, phases, recorder, plan
        )
        started = _now()
        kept = await self.keep_artifacts(environment, spec)
        keep_phase_log(spec, "collection", kept)
        phases.append(PhaseRecord(name=Phase.ARTIFACTS, started_at=started, ended_at=_now()))
        error = agent_error or verifier_error
        return TrialOutcome(
            status=TrialStatus.FAILED if error else TrialStatus.COMPLETED,
            error=error,
            reward=reading.reward,
            reward_note=reading.note,
            dimensions=reading.dimensions,
            phases=phases,
        )

    @staticmethod
    async def keep_artifacts(environment: Environment, spec: TrialSpec) -> str:
        """The agent's and the verifier's logs: the output the worker captured, then what the
        commands left in their log directories inside, copied out by the environment (secrets
        masked; a name the capture already took gets a numbered sibling). Returns what was kept,
        for the collection phase's log."""
        lines = await _keep_captures(spec)
        for source, name in (
            (environment.visible.agent_logs, "agent"),
            (environment.visible.verifier_logs, "verifier"),
        ):
            notes = await environment.get_dir(source, spec.artifacts_dir / name)
            lines.append(f"{name}: copied out of {source}")
            lines += [f"{name}: {note}" for note in notes]
        return "\n".join(lines) + "\n"

    async def agent_phase(
        self,
        environment: Environment,
        task: HarborTask,
        spec: TrialSpec,
        agent: Agent,
        phases: list[PhaseRecord],
        recorder: TrajectoryRecorder,
        plan: PhasePlan,
    ) -> tuple[TrialError | None, bool]:
        """Run the agent within its timeout: (the error that ends its phase, whether it worked on
        the task at all: an oracle without a solution, an agent that could not be installed, did
        not, and then no verifier judges it)."""
        instruction_file = f"{environment.visible.tmp}/envloop-instruction.md"
        await environment.write_file(instruction_file, task.instruction.encode())
        variables = {"ENVLOOP_INSTRUCTION_FILE": instruction_file}
        if len(task.instruction.encode()) < INSTRUCTION_VARIABLE_LIMIT:
            variables["ENVLOOP_INSTRUCTION"] = task.instruction
        if spec.max_steps is not None:
            variables["ENVLOOP_MAX_STEPS"] = str(spec.max_steps)
        unused = None if agent.info.speaks_mcp else unspoken(task, agent.info.name)
        if unused is not None and unused not in environment.warnings:
            environment.warnings.append(unused)
        # Set up before the model route opens: installing is not the agent's work, and its time is not.
        setup = AgentContext(environment, task, spec, recorder, captures_dir(spec) / plan.logs / "agent")
        setup_error = await set_up_agent(agent, setup, plan, phases)
        if setup_error is not None:
            return setup_error, False
        recording = None
        if not agent.info.records_steps:
            recorder.add(UserStep(text=task.instruction))
            recording = RecordingEnvironment(environment, recorder, agent.info.name)
            await recording.start()
        route: ModelRoute | None = None
        agent_spec = spec
        if agent.info.calls_model_inside is not None:
            try:
                max_calls = spec.max_steps if agent.info.steps_limited_by_gateway else None
                route = await open_route(
                    environment, spec, recorder, agent.info.calls_model_inside, max_calls
                )
            except RouteRefused as refused:
                return TrialError(type=refused.kind, message=str(refused)), False
            agent_spec = route.spec if route is not None else without_model_key(spec, environment.warnings)
        ctx = AgentContext(
            environment=recording or environment,
            task=task,
            spec=agent_spec,
            recorder=recorder,
            env=variables,
            model_gateway=route is not None,
            stdout_path=captures_dir(spec) / plan.logs / "agent" / "stdout.txt",
            stderr_path=captures_dir(spec) / plan.logs / "agent" / "stderr.txt",
            logs_dir=captures_dir(spec) / plan.logs / "agent",
            setup=setup.setup,
        )
        timeout = plan.agent_timeout_sec
        started = _now()
        try:
            async with asyncio.timeout(timeout) as deadline:
                result = await agent.run(ctx)
        except TimeoutError:
            if not deadline.expired():
                raise
            phases.append(PhaseRecord(name=Phase.AGENT, started_at=started, ended_at=_now(), timed_out=True))
            recorder.trajectory.stop_reason = "timeout"
            error = TrialError(
                type=ErrorType.AGENT_TIMEOUT, message=f"the agent exceeded its {timeout:g} s timeout"
            )
            return error, True
        finally:
            if route is not None:
                await finish_even_if_cancelled(close_route(route, environment, recorder))
        if route is not None and route.session.limit_reached:
            # The gateway refused the call past --max-steps: the agent's failure on it is that stop.
            result = AgentResult(exit_code=result.exit_code, stop_reason="max_steps")
        phases.append(
            PhaseRecord(name=Phase.AGENT, started_at=started, ended_at=_now(), exit_code=result.exit_code)
        )
        recorder.trajectory.stop_reason = result.stop_reason
        if recording is not None and recording.commands == 0:
            recorder.add(StateStep(at=started, note=f"{agent.info.name} ran no command"))
        return self._agent_error(result, spec), result.attempted

    @staticmethod
    def _agent_error(result: AgentResult, spec: TrialSpec) -> TrialError | None:
        if result.error is not None:
            message = mask_text(result.error, spec.secret_values)
            return TrialError(type=result.error_type, message=message, exit_code=result.exit_code)
        # An agent that says why it stopped has judged its own exit; otherwise the exit code decides.
        if result.stop_reason is None and result.exit_code != 0:
            message = f"the agent exited with code {result.exit_code}"
            return TrialError(type=ErrorType.AGENT_ERROR, message=message, exit_code=result.exit_code)
        return None


def _setup_log(environment: Environment) -> str:
    lines = [f"sandbox: {environment.mode}", f"note: {environment.note}"]
    lines.append(f"limits: {environment.limits.describe()}")
    lines += [f"warning: {warning}" for warning in environment.warnings]
    return "\n".join(lines) + "\n"


async def _keep_captures(spec: TrialSpec) -> list[str]:
    """Keep the output streams the worker captured (moved when no secret needs masking, else
    copied masked), then drop the capture directory; what it says it kept."""
    captures = captures_dir(spec)
    if not captures.is_dir():
        return []
    lines = []
    for source in sorted(captures.iterdir()):
        target = spec.artifacts_dir / source.name
        notes: list[str] = []
        if not move_plain_tree(source, target, spec.secret_values, _INLINE_ARTIFACT_ENTRIES):
            notes = await asyncio.to_thread(keep_tree, source, target, spec.secret_values)
        lines.append(f"{source.name}: output captured by the worker")
        lines += [f"{source.name}: {note}" for note in notes]
    try:
        captures.rmdir()
    except OSError:
        await asyncio.to_thread(shutil.rmtree, captures, True)
    return lines
