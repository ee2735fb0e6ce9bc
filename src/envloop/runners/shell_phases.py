"""What one agent phase and its verifier run use, for a whole task or for one step of a multi-step
task, the agent's setup phase before it, and the checks every phase ends with."""

import asyncio
from dataclasses import dataclass
from pathlib import Path

from envloop.agents.base import Agent, AgentContext, AgentResult, SetsUp
from envloop.core.clock import utc_now
from envloop.core.masking import mask_text
from envloop.core.reward import RewardReading
from envloop.core.status import ErrorType, Phase
from envloop.core.trial import PhaseRecord, TrialError, TrialSpec
from envloop.environments import Environment
from envloop.environments.policy import operator_policy
from envloop.tasks.model import HarborTask, TaskStep
from envloop.tasks.phases import PUBLIC, NetworkPolicy
from envloop.tasks.task_toml import TaskUser
from envloop.tasks.variables import resolve_env

UNATTEMPTED = RewardReading(reward=None, note="the agent never worked on the task, so no verifier judged it")
DEFAULT_AGENT_SETUP_TIMEOUT_SEC = 360.0
"""Harbor's own default for installing an agent (its trial's `_AGENT_SETUP_TIMEOUT_SEC`); a job's
`--agent-setup-timeout` replaces it, and the operator's ENVLOOP_MAX_TIMEOUT_SEC caps both."""


@dataclass(frozen=True)
class PhasePlan:
    """What one agent phase and the verifier run after it use: the whole task's settings, or a
    multi-step task's step with its own falling back to the task's."""

    agent_timeout_sec: float
    verifier_timeout_sec: float
    verifier_env: dict[str, str]
    verifier_user: TaskUser
    agent_setup_timeout_sec: float = DEFAULT_AGENT_SETUP_TIMEOUT_SEC
    logs: str = ""
    """Where the phases' captured output is kept, below the trial's artifacts ("" or steps/NAME)."""


def phase_plan(task: HarborTask, environment: Environment, spec: TrialSpec) -> PhasePlan:
    verifier = task.config.verifier
    return PhasePlan(
        agent_timeout_sec=environment.limits.agent_timeout_sec,
        verifier_timeout_sec=environment.limits.verifier_timeout_sec,
        verifier_env=resolve_env(verifier.env, spec.params),
        verifier_user=verifier.user if verifier.user is not None else "root",
        agent_setup_timeout_sec=agent_setup_timeout(spec, environment),
    )


def agent_setup_timeout(spec: TrialSpec, environment: Environment) -> float:
    """The job's agent setup timeout, else Harbor's default, under the operator's ceiling (a cut is
    one of the trial's warnings). Harbor's task.toml has no setup timeout, so no task sets one."""
    asked = spec.agent_setup_timeout_sec or DEFAULT_AGENT_SETUP_TIMEOUT_SEC
    ceiling = operator_policy().max_timeout_sec
    if asked <= ceiling:
        return asked
    warning = f"agent setup timeout {asked:g} s asked, capped at the operator's maximum {ceiling:g} s"
    if warning not in environment.warnings:
        environment.warnings.append(warning)
    return ceiling


def step_plan(task: HarborTask, step: TaskStep, environment: Environment, spec: TrialSpec) -> PhasePlan:
    """A step's own timeouts, verifier variables and user, each falling back to the task's (as in
    Harbor); timeouts stay under the operator's ceiling."""
    whole = phase_plan(task, environment, spec)
    ceiling = operator_policy().max_timeout_sec
    agent, verifier = step.config.agent, step.config.verifier
    return PhasePlan(
        # The job's own timeouts win, as they do over the task's.
        agent_timeout_sec=min(
            spec.agent_timeout_sec or agent.timeout_sec or whole.agent_timeout_sec, ceiling
        ),
        verifier_timeout_sec=min(
            spec.verifier_timeout_sec or verifier.timeout_sec or whole.verifier_timeout_sec, ceiling
        ),
        verifier_env={**whole.verifier_env, **resolve_env(verifier.env, spec.params)},
        verifier_user=verifier.user if verifier.user is not None else whole.verifier_user,
        agent_setup_timeout_sec=whole.agent_setup_timeout_sec,
        logs=f"steps/{step.name}",
    )


async def set_up_agent(
    agent: Agent, ctx: AgentContext, plan: PhasePlan, phases: list[PhaseRecord]
) -> TrialError | None:
    """The agent's setup phase (agents/base.py `SetsUp`), within its own timeout: why the agent
    cannot start (then it never worked on the task, and no verifier judges it), or None with what
    the setup made ready in `ctx.setup`. An agent without a setup phase has none to record."""
    if not isinstance(agent, SetsUp):
        return None
    timeout = plan.agent_setup_timeout_sec
    started = utc_now()
    try:
        async with asyncio.timeout(timeout) as deadline:
            ready = await agent.setup(ctx)
    except TimeoutError:
        if not deadline.expired():
            raise
        ended = utc_now()
        phases.append(PhaseRecord(name=Phase.AGENT_SETUP, started_at=started, ended_at=ended, timed_out=True))
        message = f"the agent's setup exceeded its {timeout:g} s timeout (--agent-setup-timeout)"
        return TrialError(type=ErrorType.AGENT_SETUP_ERROR, message=message)
    phases.append(PhaseRecord(name=Phase.AGENT_SETUP, started_at=started, ended_at=utc_now()))
    if isinstance(ready, AgentResult):
        message = mask_text(ready.error or "the agent's setup failed", ctx.spec.secret_values)
        return TrialError(type=ready.error_type, message=message, exit_code=ready.exit_code)
    ctx.setup = ready
    return None


def agent_network(policy: NetworkPolicy, spec: TrialSpec) -> NetworkPolicy:
    """The agent phase's policy: the task's, opened to `public` when the profile asks for a network
    (`NETWORK=public`: an agent that calls its model from inside) and the task left it closed. A
    task's allowlist stays as its author wrote it."""
    if spec.network and policy.mode == "no-network":
        return PUBLIC
    return policy


def captures_dir(spec: TrialSpec) -> Path:
    """Where the worker streams the output of the trial's commands (files of the worker, never
    inside the instance). With secrets to mask, a directory apart until collection keeps it, masked,
    beside the logs copied out; with none, the place it is kept (the trial's artifacts), so no
    directory is made, moved and removed for it. The logs copied out join it there either way."""
    if any(spec.secret_values):
        return spec.artifacts_dir / ".captures"
    return spec.artifacts_dir


def exhausted(phase: str, environment: Environment) -> TrialError | None:
    problem = environment.resource_problem()
    if problem is None:
        return None
    return TrialError(type=ErrorType.RESOURCE_EXHAUSTED, message=f"{phase} phase: {problem}")


def cut_off(phase: str, environment: Environment) -> TrialError | None:
    """An allowed destination the phase could not reach: the checks then judge this machine's
    network, not the agent, so the trial is an environment error and its reading is not counted."""
    problem = environment.network_shortfall()
    if problem is None:
        return None
    return TrialError(type=ErrorType.ENVIRONMENT_ERROR, message=f"{phase} phase: {problem}")


def unless_cut_off(
    reading: RewardReading,
    agent_error: TrialError | None,
    after_agent: TrialError | None,
    environment: Environment,
) -> tuple[RewardReading, TrialError | None]:
    """The verifier's reading and the agent's error, unless the agent's phase (`after_agent`) or the
    verifier's could not reach an allowed destination: then not counted, and that is the error."""
    unreachable = after_agent or cut_off("verifier", environment)
    if unreachable is None:
        return reading, agent_error
    return not_counted(reading, unreachable), unreachable


def not_counted(reading: RewardReading, error: TrialError) -> RewardReading:
    """The reading of a phase whose network failed its promise; the verifier's own words stay in
    the trajectory's verifier step."""
    if reading.reward is None and not reading.dimensions:
        return reading
    return RewardReading(reward=None, note=f"not counted: {error.message}")


def keep_phase_log(spec: TrialSpec, phase: str, text: str) -> None:
    """A phase without a command of its own still says what it did (`el trial logs --phase`)."""
    directory = spec.artifacts_dir / phase
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "output.txt").write_text(mask_text(text, spec.secret_values), encoding="utf-8")
