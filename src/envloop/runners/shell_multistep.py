"""A multi-step Harbor task in `envloop/shell@1`, and the agent-then-verifier pair every task runs.

The steps run in order in one environment, each an agent phase with the step's instruction and a
verifier run with the step's tests laid over the task's; the steps' results roll up into the
trial's reward by the task's strategy (core.multistep, which states Harbor's rules and envloop's
one stricter rule).

A step whose result misses its `min_reward`, whose phase ran out of memory or disk, or whose agent
could not be set up, ends the trial: later steps do not run, and the trial says after which step
and why. Each step's verifier logs are kept under `steps/<name>/verifier`, its captured output under
`steps/<name>/`.
"""

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from envloop.agents import Agent
from envloop.core.multistep import StepResult, below_minimum, roll_up, step_values
from envloop.core.reward import RewardReading
from envloop.core.status import ErrorType, Phase, TrialStatus
from envloop.core.trajectory import StateStep, TrajectoryRecorder
from envloop.core.trial import PhaseRecord, TrialError, TrialOutcome, TrialSpec
from envloop.environments import Environment, EnvironmentProvider
from envloop.runners.healthcheck import wait_healthy
from envloop.runners.shell_phases import (
    UNATTEMPTED,
    PhasePlan,
    agent_network,
    captures_dir,
    cut_off,
    exhausted,
    keep_phase_log,
    step_plan,
    unless_cut_off,
)
from envloop.runners.step_setup import prepare_step
from envloop.runners.verification import verify
from envloop.runners.verifier_runs import judge_again
from envloop.tasks.model import HarborTask, TaskStep
from envloop.tasks.phases import phase_networks, verifier_mode

if TYPE_CHECKING:
    from envloop.runners.shell import ShellRunner


async def agent_then_verifier(
    runner: "ShellRunner",
    environment: Environment,
    provider: EnvironmentProvider,
    task: HarborTask,
    step: TaskStep | None,
    spec: TrialSpec,
    agent: Agent,
    phases: list[PhaseRecord],
    recorder: TrajectoryRecorder,
    plan: PhasePlan,
) -> tuple[RewardReading, TrialError | None, TrialError | None]:
    """One agent phase and the verifier after it, for a whole task or one step: (reading, the
    agent's error, the verifier's). Nothing a phase started outlives it (a leftover process could
    rewrite the reward after the verifier wrote it); a phase that ran out of its limits, or whose
    allowed hosts this machine could not reach, leaves the reading unscored."""
    agent_error, attempted = await runner.agent_phase(environment, task, spec, agent, phases, recorder, plan)
    await environment.stop()
    agent_error = exhausted("agent", environment) or agent_error
    unreachable = cut_off("agent", environment)
    reading, verifier_error = (
        await verify(environment, provider, task, step, spec, phases, recorder, plan)
        if attempted
        else (UNATTEMPTED, None)
    )
    await environment.stop()
    verifier_error = exhausted("verifier", environment) or verifier_error
    if attempted and verifier_error is None:
        await judge_again(environment, provider, task, step, spec, phases, recorder, plan, reading)
    reading, agent_error = unless_cut_off(reading, agent_error, unreachable, environment)
    return reading, agent_error, verifier_error


async def run_steps(
    runner: "ShellRunner",
    environment: Environment,
    provider: EnvironmentProvider,
    task: HarborTask,
    spec: TrialSpec,
    agent: Agent,
    phases: list[PhaseRecord],
    recorder: TrajectoryRecorder,
) -> TrialOutcome:
    results: list[StepResult] = []
    errors: list[TrialError] = []
    stopped: str | None = None
    for step in task.steps:
        # The environment reads the step's tests, solution and agent user from this task.
        task.active_step = step.name
        view = task.model_copy(update={"instruction": step.instruction})
        plan = step_plan(task, step, environment, spec)
        networks = phase_networks(task.config, step.config, environment.default_network)
        recorder.add(StateStep(at=datetime.now(UTC), note=f"step {step.name!r} begins"))
        await environment.set_network(networks.baseline, f"{step.name} setup")
        problem = await _step_ready(environment, step, spec, plan)
        if problem is not None:
            return await _stopped_before(runner, environment, task, spec, step, results, phases, problem)
        await environment.set_network(agent_network(networks.agent, spec), f"{step.name} agent")
        reading, agent_error, verifier_error = await agent_then_verifier(
            runner, environment, provider, view, step, spec, agent, phases, recorder, plan
        )
        if verifier_mode(task.config, step.config) == "shared":
            await environment.get_dir(
                environment.visible.verifier_logs, spec.artifacts_dir / "steps" / step.name / "verifier"
            )
        values = step_values(reading.reward, reading.dimensions)
        results.append(StepResult(name=step.name, values=values, note=reading.note))
        error = agent_error or verifier_error
        if error is not None:
            errors.append(error.model_copy(update={"message": f"step {step.name!r}: {error.message}"}))
        gate = below_minimum(values, step.config.min_reward)
        if (
            gate is None
            and error is not None
            and error.type
            in (ErrorType.RESOURCE_EXHAUSTED, ErrorType.ENVIRONMENT_ERROR, ErrorType.AGENT_SETUP_ERROR)
        ):
            gate = error.message
        if gate is not None:
            stopped = f"stopped after step {step.name!r}: {gate}"
            break
    task.active_step = None
    started = datetime.now(UTC)
    keep_phase_log(spec, "collection", await runner.keep_artifacts(environment, spec))
    phases.append(PhaseRecord(name=Phase.ARTIFACTS, started_at=started, ended_at=datetime.now(UTC)))
    strategy = task.config.multi_step_reward_strategy or "mean"
    rolled = roll_up(strategy, results)
    ran = ", ".join(f"{r.name}={_shown(r)}" for r in results)
    warnings = [f"multi-step ({strategy}): {len(results)} of {len(task.steps)} steps ran ({ran})"]
    if stopped is not None:
        warnings.append(stopped)
    error = errors[0] if errors else None
    return TrialOutcome(
        status=TrialStatus.FAILED if error else TrialStatus.COMPLETED,
        error=error,
        reward=rolled.reward,
        reward_note=rolled.note,
        dimensions=rolled.dimensions,
        phases=phases,
        warnings=warnings,
    )


async def _step_ready(
    environment: Environment, step: TaskStep, spec: TrialSpec, plan: PhasePlan
) -> TrialError | None:
    """The step's own setup, then its healthcheck: why the step cannot begin, or None."""
    problem = await prepare_step(
        environment, step, plan.agent_timeout_sec, captures_dir(spec) / plan.logs / "setup"
    )
    if problem is not None:
        return problem.model_copy(update={"message": f"step {step.name!r}: {problem.message}"})
    if step.config.healthcheck is None:
        return None
    where = f"step {step.name!r}: [steps.healthcheck]"
    report = await wait_healthy(
        environment, step.config.healthcheck, where, captures_dir(spec) / plan.logs / "healthcheck"
    )
    keep_phase_log(spec, f"{plan.logs}/healthcheck", "\n".join(report.lines) + "\n")
    return report.error


async def _stopped_before(
    runner: "ShellRunner",
    environment: Environment,
    task: HarborTask,
    spec: TrialSpec,
    step: TaskStep,
    results: list[StepResult],
    phases: list[PhaseRecord],
    error: TrialError,
) -> TrialOutcome:
    """A step whose setup or healthcheck failed: its agent never started where its task meant, so
    the trial ends unscored (never the mean of the steps before it)."""
    task.active_step = None
    await environment.stop()
    keep_phase_log(spec, "collection", await runner.keep_artifacts(environment, spec))
    ran = ", ".join(f"{r.name}={_shown(r)}" for r in results) or "none"
    return TrialOutcome(
        status=TrialStatus.FAILED,
        error=error,
        reward_note=error.message,
        phases=phases,
        warnings=[f"multi-step: stopped before step {step.name!r} (steps that ran: {ran})"],
    )


def _shown(result: StepResult) -> str:
    if not result.values:
        return "none"
    return ",".join(f"{key}:{value:g}" for key, value in result.values.items())
