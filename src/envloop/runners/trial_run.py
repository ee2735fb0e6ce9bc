"""One `envloop/shell@1` trial as an object: its state (trial_state.py), the environment it opens
and always tears down, the two ways it proceeds (a task in one step, or a multi-step task's steps
in order), and the hooks where observers attach.

    setup (the environment opens) → [healthcheck] → in one step, or step by step:
        agent setup → agent → (every process stopped) → collect hooks and artifacts → verifier
    → collection (the logs and captured output kept) → teardown (always)

The runner (shell.py) resolves what the trial needs (its agent, its task, its environment's
provider) and hands it over; a trial run never chooses or builds any of them. A failure of the
environment's setup, or one it reports midway, is the trial's `environment_error`; a teardown that
fails is a warning. Anything else that raises leaves the environment torn down and goes on to the
runner, which makes it an infrastructure error (and lets only cancellation through).

Observers (`add_hook`) are called at each event in the order they were added; an observer that
fails is noted in the trial's warnings and never changes its verdict. See
docs/design/verdict-pipeline.md for where a new phase or observer belongs.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from envloop.core.clock import utc_now
from envloop.core.masking import mask_text
from envloop.core.multistep import RolledUp, StepResult, roll_up, step_values
from envloop.core.reward import RewardReading
from envloop.core.status import ErrorType, Phase, TrialStatus
from envloop.core.trajectory import StateStep
from envloop.core.trial import PhaseRecord, TrialError, TrialOutcome, TrialSpec
from envloop.environments import Environment, EnvironmentSetupError
from envloop.runners.agent_phase import run_agent_phase
from envloop.runners.collection import keep_artifacts
from envloop.runners.healthcheck import wait_healthy
from envloop.runners.shell_multistep import step_ready, steps_that_ran, why_the_steps_end
from envloop.runners.shell_phases import (
    UNATTEMPTED,
    PhasePlan,
    agent_network,
    captures_dir,
    cut_off,
    exhausted,
    keep_phase_log,
    phase_plan,
    step_plan,
    unless_cut_off,
)
from envloop.runners.trial_state import TrialState
from envloop.runners.verification import verify
from envloop.runners.verifier_runs import judge_again
from envloop.tasks.model import HarborTask, TaskStep
from envloop.tasks.phases import phase_networks, verifier_mode


class TrialEvent(StrEnum):
    ENVIRONMENT_READY = "environment_ready"
    """The environment is open (before the task's healthcheck)."""
    STEP_START = "step_start"
    """A multi-step task's step begins (before its own setup)."""
    AGENT_START = "agent_start"
    """An agent phase begins (its agent's setup first, when it has one)."""
    VERIFIER_START = "verifier_start"
    """The agent worked on the task and every process it left is stopped: the verifier's turn."""
    ENDED = "ended"
    """The environment is torn down and the outcome known (not yet masked: the runner masks it)."""


@dataclass(frozen=True)
class TrialHookEvent:
    event: TrialEvent
    trial: "TrialRun"
    step: str | None = None
    """The multi-step task's step the event belongs to; None for a task in one step."""
    outcome: TrialOutcome | None = None
    """At `ended` only."""


TrialHook = Callable[[TrialHookEvent], Awaitable[None]]


def setup_failed(
    spec: TrialSpec, phases: list[PhaseRecord], started: datetime, exc: Exception
) -> TrialOutcome:
    """The outcome of a trial whose environment could not be had: its setup phase, and why."""
    phases.append(PhaseRecord(name=Phase.SETUP, started_at=started, ended_at=utc_now()))
    message = mask_text(f"environment setup failed: {exc}", spec.secret_values)
    error = TrialError(type=ErrorType.ENVIRONMENT_ERROR, message=message)
    return TrialOutcome(status=TrialStatus.FAILED, error=error, phases=phases)


@dataclass(kw_only=True)
class TrialRun(TrialState):
    setup_started: datetime = field(default_factory=utc_now)
    """When the setup phase began: the runner's choice of the task and its provider is part of it."""
    setup_warnings: list[str] = field(default_factory=list)
    """What the setup found (a task feature the provider only approximates): shown in its log."""
    choice_warning: str | None = None
    """Why the provider is not the one the job asked for, if it is not."""
    _hooks: list[tuple[TrialEvent, TrialHook]] = field(default_factory=list, init=False, repr=False)
    _observer_warnings: list[str] = field(default_factory=list, init=False, repr=False)

    def add_hook(self, event: TrialEvent, hook: TrialHook) -> None:
        """Call `hook` at `event`, after the hooks added before it."""
        self._hooks.append((event, hook))

    async def _emit(
        self, event: TrialEvent, step: str | None = None, outcome: TrialOutcome | None = None
    ) -> None:
        for wanted, hook in self._hooks:
            if wanted != event:
                continue
            try:
                await hook(TrialHookEvent(event=event, trial=self, step=step, outcome=outcome))
            except Exception as exc:  # an observer's failure is its own, never the trial's
                self._observer_warnings.append(f"observer at {event}: {type(exc).__name__}: {exc}")

    async def run(self) -> TrialOutcome:
        """Open the environment, proceed, tear it down: the outcome, never raised for the trial's
        own failures (the environment's included)."""
        outcome: TrialOutcome | None = None
        teardown_started = utc_now()
        try:
            async with self.provider.instance(self.task, self.spec) as environment:
                self._opened(environment)
                await self._emit(TrialEvent.ENVIRONMENT_READY)
                try:
                    outcome = await self._proceed()
                except EnvironmentSetupError as exc:
                    # The environment failed the trial midway (a phase's network, a sidecar): its doing.
                    message = mask_text(str(exc), self.spec.secret_values)
                    error = TrialError(type=ErrorType.ENVIRONMENT_ERROR, message=message)
                    outcome = TrialOutcome(status=TrialStatus.FAILED, error=error, phases=self.phases)
                teardown_started = utc_now()
        except Exception as exc:
            if self._environment is None:
                return await self._ended(setup_failed(self.spec, self.phases, self.setup_started, exc))
            if outcome is None:
                raise  # the environment is torn down; the runner tells what happened
            outcome.warnings.append(f"teardown failed: {exc}")
        assert outcome is not None  # the body either set it or raised
        outcome.phases.append(
            PhaseRecord(name=Phase.TEARDOWN, started_at=teardown_started, ended_at=utc_now())
        )
        outcome.warnings.extend(self.environment.warnings)
        outcome.flags.extend(self.environment.flags)
        self.contacted.add(self.environment)
        outcome.destinations = self.contacted.record()
        if self.choice_warning is not None:
            outcome.warnings.append(self.choice_warning)
        outcome.sandbox = self.environment.mode
        outcome.sandbox_note = self.environment.note
        return await self._ended(outcome)

    def _opened(self, environment: Environment) -> None:
        self._environment = environment
        self.phases.append(PhaseRecord(name=Phase.SETUP, started_at=self.setup_started, ended_at=utc_now()))
        environment.warnings.extend(self.setup_warnings)

    async def _ended(self, outcome: TrialOutcome) -> TrialOutcome:
        await self._emit(TrialEvent.ENDED, outcome=outcome)
        outcome.warnings.extend(self._observer_warnings)
        return outcome

    async def _proceed(self) -> TrialOutcome:
        """The setup log and the task's healthcheck, then the task in one step or step by step."""
        environment = self.environment
        keep_phase_log(self.spec, "setup", _setup_log(environment))
        check = self.task.config.environment.healthcheck
        if check is not None:
            report = await wait_healthy(
                environment, check, "[environment.healthcheck]", captures_dir(self.spec) / "healthcheck"
            )
            keep_phase_log(self.spec, "setup", _setup_log(environment) + "\n".join(report.lines) + "\n")
            if report.error is not None:
                await environment.stop()
                return TrialOutcome(status=TrialStatus.FAILED, error=report.error, phases=self.phases)
        if self.task.steps:
            return await self.by_steps()
        return await self.in_one_step()

    async def in_one_step(self) -> TrialOutcome:
        """A task without steps: one agent phase, the verifier after it, collection."""
        environment = self.environment
        plan = phase_plan(self.task, environment, self.spec)
        networks = phase_networks(self.task.config, default=environment.default_network)
        await environment.set_network(agent_network(networks.agent, self.spec), "agent")
        reading, agent_error, verifier_error = await self.agent_then_verifier(self.task, None, plan)
        await self._collect()
        return self._scored(agent_error or verifier_error, reading)

    async def by_steps(self) -> TrialOutcome:
        """A multi-step task: each step's setup, agent and verifier in order in this one
        environment, until a step ends the trial (shell_multistep.py); the steps' results roll up
        into the trial's reward by the task's strategy."""
        environment, task, spec = self.environment, self.task, self.spec
        results: list[StepResult] = []
        errors: list[TrialError] = []
        stopped: str | None = None
        for step in task.steps:
            # The environment reads the step's tests, solution and agent user from this task.
            task.active_step = step.name
            view = task.model_copy(update={"instruction": step.instruction})
            plan = step_plan(task, step, environment, spec)
            networks = phase_networks(task.config, step.config, environment.default_network)
            self.recorder.add(StateStep(at=utc_now(), note=f"step {step.name!r} begins"))
            await self._emit(TrialEvent.STEP_START, step.name)
            await environment.set_network(networks.baseline, f"{step.name} setup")
            problem = await step_ready(environment, step, spec, plan)
            if problem is not None:
                return await self._stopped_before(step, results, problem)
            await environment.set_network(agent_network(networks.agent, spec), f"{step.name} agent")
            reading, agent_error, verifier_error = await self.agent_then_verifier(view, step, plan)
            if verifier_mode(task.config, step.config) == "shared":
                await environment.get_dir(
                    environment.visible.verifier_logs, spec.artifacts_dir / "steps" / step.name / "verifier"
                )
            values = step_values(reading.reward, reading.dimensions)
            results.append(StepResult(name=step.name, values=values, note=reading.note))
            error = agent_error or verifier_error
            if error is not None:
                errors.append(error.model_copy(update={"message": f"step {step.name!r}: {error.message}"}))
            gate = why_the_steps_end(step, values, error)
            if gate is not None:
                stopped = f"stopped after step {step.name!r}: {gate}"
                break
        task.active_step = None
        await self._collect()
        strategy = task.config.multi_step_reward_strategy or "mean"
        rolled = roll_up(strategy, results)
        ran = f"{len(results)} of {len(task.steps)} steps ran ({steps_that_ran(results)})"
        warnings = [f"multi-step ({strategy}): {ran}"]
        if stopped is not None:
            warnings.append(stopped)
        return self._scored(errors[0] if errors else None, rolled, warnings)

    def _scored(
        self, error: TrialError | None, scored: RewardReading | RolledUp, warnings: list[str] | None = None
    ) -> TrialOutcome:
        """The outcome of a trial that ran to its verdict (of the task, or rolled up from its steps)."""
        return TrialOutcome(
            status=TrialStatus.FAILED if error else TrialStatus.COMPLETED,
            error=error,
            reward=scored.reward,
            reward_note=scored.note,
            dimensions=scored.dimensions,
            phases=self.phases,
            warnings=warnings or [],
        )

    async def agent_then_verifier(
        self, task: HarborTask, step: TaskStep | None, plan: PhasePlan
    ) -> tuple[RewardReading, TrialError | None, TrialError | None]:
        """One agent phase and the verifier after it, for the whole task or one step (`task` is
        then the step's view of it): (reading, the agent's error, the verifier's). Nothing a phase
        started outlives it (a leftover process could rewrite the reward after the verifier wrote
        it); a phase that ran out of its limits, or whose allowed hosts this machine could not
        reach, leaves the reading unscored."""
        environment = self.environment
        name = step.name if step is not None else None
        await self._emit(TrialEvent.AGENT_START, name)
        agent_error, attempted = await run_agent_phase(self, task, plan)
        await environment.stop()
        agent_error = exhausted("agent", environment) or agent_error
        unreachable = cut_off("agent", environment)
        reading, verifier_error = UNATTEMPTED, None
        if attempted:
            await self._emit(TrialEvent.VERIFIER_START, name)
            reading, verifier_error = await verify(self, task, step, plan)
        await environment.stop()
        verifier_error = exhausted("verifier", environment) or verifier_error
        if attempted and verifier_error is None:
            await judge_again(self, task, step, plan, reading)
        reading, agent_error = unless_cut_off(reading, agent_error, unreachable, environment)
        return reading, agent_error, verifier_error

    async def _collect(self) -> None:
        """The collection phase: the logs and captured output kept, with its log and record."""
        started = utc_now()
        keep_phase_log(self.spec, "collection", await keep_artifacts(self.environment, self.spec))
        self.phases.append(PhaseRecord(name=Phase.ARTIFACTS, started_at=started, ended_at=utc_now()))

    async def _stopped_before(
        self, step: TaskStep, results: list[StepResult], error: TrialError
    ) -> TrialOutcome:
        """A step whose setup or healthcheck failed: its agent never started where its task meant, so
        the trial ends unscored (never the mean of the steps before it)."""
        self.task.active_step = None
        await self.environment.stop()
        keep_phase_log(self.spec, "collection", await keep_artifacts(self.environment, self.spec))
        ran = steps_that_ran(results) or "none"
        return TrialOutcome(
            status=TrialStatus.FAILED,
            error=error,
            reward_note=error.message,
            phases=self.phases,
            warnings=[f"multi-step: stopped before step {step.name!r} (steps that ran: {ran})"],
        )


def _setup_log(environment: Environment) -> str:
    lines = [f"sandbox: {environment.mode}", f"note: {environment.note}"]
    lines.append(f"limits: {environment.limits.describe()}")
    lines += [f"warning: {warning}" for warning in environment.warnings]
    return "\n".join(lines) + "\n"
