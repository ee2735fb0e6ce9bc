"""The parts of a multi-step Harbor task's run that need no trial run: a step's readiness, the
rule that ends the steps early, and how the steps that ran are told in the trial's warnings.

The steps run in order in one environment (`TrialRun.by_steps`), each an agent phase with the
step's instruction and a verifier run with the step's tests laid over the task's; the steps'
results roll up into the trial's reward by the task's strategy (core.multistep, which states
Harbor's rules and envloop's one stricter rule).

A step whose result misses its `min_reward`, whose phase ran out of memory or disk, or whose agent
could not be set up, ends the trial: later steps do not run, and the trial says after which step
and why. Each step's verifier logs are kept under `steps/<name>/verifier`, its captured output under
`steps/<name>/`.
"""

from envloop.core.multistep import StepResult, below_minimum
from envloop.core.status import ErrorType
from envloop.core.trial import TrialError, TrialSpec
from envloop.environments import Environment
from envloop.runners.healthcheck import wait_healthy
from envloop.runners.shell_phases import PhasePlan, captures_dir, keep_phase_log
from envloop.runners.step_setup import prepare_step
from envloop.tasks.model import TaskStep

_ENDS_THE_STEPS = (ErrorType.RESOURCE_EXHAUSTED, ErrorType.ENVIRONMENT_ERROR, ErrorType.AGENT_SETUP_ERROR)


async def step_ready(
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


def why_the_steps_end(step: TaskStep, values: dict[str, float], error: TrialError | None) -> str | None:
    """Why no step after this one runs (its result missed its minimum, or its environment or agent
    failed it), or None to go on."""
    gate = below_minimum(values, step.config.min_reward)
    if gate is None and error is not None and error.type in _ENDS_THE_STEPS:
        gate = error.message
    return gate


def steps_that_ran(results: list[StepResult]) -> str:
    """The steps that ran with their values, for the trial's warnings."""
    return ", ".join(f"{result.name}={_shown(result)}" for result in results)


def _shown(result: StepResult) -> str:
    if not result.values:
        return "none"
    return ",".join(f"{key}:{value:g}" for key, value in result.values.items())
