"""The agent phase of a shell trial (or of one step of a multi-step one): the agent's setup, then
the agent itself within its timeout.

The instruction reaches the agent as a file (and as a variable when it is small enough); an agent
that keeps no trajectory of its own is observed by `CommandRecording`, which records each command
it runs; an agent that calls its model from inside reaches it through the
worker's model route, opened after the setup (installing is not the agent's work, and its time is
not) and closed even on cancellation.
"""

import asyncio

from envloop.agents import AgentContext
from envloop.agents.base import AgentResult
from envloop.agents.mcp import unspoken
from envloop.core.clock import utc_now
from envloop.core.masking import mask_text
from envloop.core.status import ErrorType, Phase
from envloop.core.trajectory import StateStep, UserStep
from envloop.core.trial import PhaseRecord, TrialError, TrialSpec
from envloop.environments.shielded import finish_even_if_cancelled
from envloop.runners.model_route import ModelRoute, RouteRefused, close_route, open_route, without_model_key
from envloop.runners.shell_phases import PhasePlan, captures_dir, set_up_agent
from envloop.runners.shell_steps import CommandRecording
from envloop.runners.trial_state import TrialState
from envloop.tasks.model import HarborTask

INSTRUCTION_VARIABLE_LIMIT = 64 * 1024


async def run_agent_phase(
    trial: TrialState, task: HarborTask, plan: PhasePlan
) -> tuple[TrialError | None, bool]:
    """Run the agent on `task` (the trial's, or a step's view of it) within its timeout: (the
    error that ends its phase, whether it worked on the task at all: an oracle without a solution,
    an agent that could not be installed, did not, and then no verifier judges it)."""
    environment, spec, agent, recorder = trial.environment, trial.spec, trial.agent, trial.recorder
    variables = await _hand_instruction(trial, task)
    unused = None if agent.info.speaks_mcp else unspoken(task, agent.info.name)
    if unused is not None and unused not in environment.warnings:
        environment.warnings.append(unused)
    # Set up before the model route opens: installing is not the agent's work, and its time is not.
    setup = AgentContext(environment, task, spec, recorder, captures_dir(spec) / plan.logs / "agent")
    setup_error = await set_up_agent(agent, setup, plan, trial.phases)
    if setup_error is not None:
        return setup_error, False
    recording = None
    if not agent.info.records_steps:
        recorder.add(UserStep(text=task.instruction))
        recording = CommandRecording(environment, recorder, agent.info.name)
        await recording.start()
    route: ModelRoute | None = None
    agent_spec = spec
    if agent.info.calls_model_inside is not None:
        try:
            max_calls = spec.max_steps if agent.info.steps_limited_by_gateway else None
            calling = environment if agent.info.model_calls_from == "environment" else None
            route = await open_route(calling, spec, recorder, agent.info.calls_model_inside, max_calls)
        except RouteRefused as refused:
            return TrialError(type=refused.kind, message=str(refused)), False
        agent_spec = route.spec if route is not None else without_model_key(spec, environment.warnings)
    ctx = AgentContext(
        environment=environment,
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
    started = utc_now()
    environment.observe(recording)
    try:
        async with asyncio.timeout(timeout) as deadline:
            result = await agent.run(ctx)
    except TimeoutError:
        if not deadline.expired():
            raise
        trial.phases.append(
            PhaseRecord(name=Phase.AGENT, started_at=started, ended_at=utc_now(), timed_out=True)
        )
        recorder.trajectory.stop_reason = "timeout"
        error = TrialError(
            type=ErrorType.AGENT_TIMEOUT, message=f"the agent exceeded its {timeout:g} s timeout"
        )
        return error, True
    finally:
        environment.observe(None)
        if route is not None:
            await finish_even_if_cancelled(close_route(route, environment, recorder))
    if route is not None and route.session.limit_reached:
        # The gateway refused the call past --max-steps: the agent's failure on it is that stop.
        result = AgentResult(exit_code=result.exit_code, stop_reason="max_steps")
    trial.phases.append(
        PhaseRecord(name=Phase.AGENT, started_at=started, ended_at=utc_now(), exit_code=result.exit_code)
    )
    recorder.trajectory.stop_reason = result.stop_reason
    if recording is not None and recording.commands == 0:
        recorder.add(StateStep(at=started, note=f"{agent.info.name} ran no command"))
    return agent_error(result, spec), result.attempted


async def _hand_instruction(trial: TrialState, task: HarborTask) -> dict[str, str]:
    """Write the instruction into the environment; the variables that tell the agent of it (and
    of its step budget)."""
    instruction_file = f"{trial.environment.visible.tmp}/envloop-instruction.md"
    await trial.environment.write_file(instruction_file, task.instruction.encode())
    variables = {"ENVLOOP_INSTRUCTION_FILE": instruction_file}
    if len(task.instruction.encode()) < INSTRUCTION_VARIABLE_LIMIT:
        variables["ENVLOOP_INSTRUCTION"] = task.instruction
    if trial.spec.max_steps is not None:
        variables["ENVLOOP_MAX_STEPS"] = str(trial.spec.max_steps)
    return variables


def agent_error(result: AgentResult, spec: TrialSpec) -> TrialError | None:
    """What the agent's result says went wrong, if anything."""
    if result.error is not None:
        message = mask_text(result.error, spec.secret_values)
        return TrialError(type=result.error_type, message=message, exit_code=result.exit_code)
    # An agent that says why it stopped has judged its own exit; otherwise the exit code decides.
    if result.stop_reason is None and result.exit_code != 0:
        message = f"the agent exited with code {result.exit_code}"
        return TrialError(type=ErrorType.AGENT_ERROR, message=message, exit_code=result.exit_code)
    return None
