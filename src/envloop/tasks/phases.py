"""Where each phase of a Harbor task runs and with which network, as Harbor resolves it.

A verifier runs in the agent's environment (`shared`) or in one of its own (`separate`): a step's
`[steps.verifier]` mode wins, else a step's `[steps.verifier.environment]` implies separate, else
the task's `[verifier]` resolves the same way, else shared. A separate verifier's environment is
the step's `[steps.verifier.environment]`, else the task's `[verifier.environment]`, else a copy of
the task's `[environment]`; its image is built from the step's `tests/` when it has one, else the
task's `tests/` (which must then hold what the verifier needs: Harbor does not copy tests in).

Network policies: `[environment]` is the agent environment's baseline (setup, healthchecks), a
separate verifier's environment has its own; `[agent]` and `[verifier]` (and their step forms)
override it for their phase. When `[environment]` says nothing the environment's default holds:
Harbor's `public` in a container, closed (`no-network`) in the local sandbox.
"""

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from envloop.tasks.model import HarborTask, TaskStep
from envloop.tasks.task_toml import (
    EnvironmentSection,
    NetworkFields,
    NetworkMode,
    StepConfig,
    TaskConfig,
    VerifierMode,
)


def verifier_mode(config: TaskConfig, step: StepConfig | None = None) -> VerifierMode:
    own = step.verifier.mode if step is not None else None
    return own or config.verifier.mode or "shared"


def verifier_modes(config: TaskConfig) -> list[VerifierMode]:
    """The mode of every verifier run of the task: one, or one per step."""
    if not config.steps:
        return [verifier_mode(config)]
    return [verifier_mode(config, step) for step in config.steps]


def verifier_environment(config: TaskConfig, step: StepConfig | None = None) -> EnvironmentSection | None:
    """The separate verifier's environment definition, or None for a shared verifier."""
    if verifier_mode(config, step) != "separate":
        return None
    if step is not None and step.verifier.environment is not None:
        return step.verifier.environment
    if config.verifier.environment is not None:
        return config.verifier.environment
    return config.environment.model_copy(deep=True)


def verifier_context(task: HarborTask, step: TaskStep | None = None) -> Path:
    """The build context of a separate verifier's image: the step's tests/ when it has one."""
    if step is not None and step.tests_dir.is_dir():
        return step.tests_dir
    return task.tests_dir


class NetworkPolicy(BaseModel):
    model_config = ConfigDict(frozen=True)

    mode: NetworkMode
    hosts: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.mode != "allowlist":
            return self.mode
        return f"allowlist ({', '.join(self.hosts) or 'no host'})"


NO_NETWORK = NetworkPolicy(mode="no-network")
PUBLIC = NetworkPolicy(mode="public")


class PhaseNetworks(BaseModel):
    """The policies of one agent phase and the verifier run after it."""

    model_config = ConfigDict(frozen=True)

    baseline: NetworkPolicy
    """The agent environment's: in force when it starts, for setup and healthchecks."""
    agent: NetworkPolicy
    verifier_baseline: NetworkPolicy | None
    """A separate verifier environment's own baseline; None for a shared verifier."""
    verifier: NetworkPolicy

    def policies(self) -> list[NetworkPolicy]:
        found = [self.baseline, self.agent, self.verifier]
        return found + ([self.verifier_baseline] if self.verifier_baseline is not None else [])


def _baseline(section: EnvironmentSection, default: NetworkMode) -> NetworkPolicy:
    return NetworkPolicy(mode=section.network(default), hosts=tuple(section.allowed_hosts or ()))


def _explicit(*sections: NetworkFields | None) -> NetworkPolicy | None:
    for section in sections:
        if section is not None and section.network_mode is not None:
            return NetworkPolicy(mode=section.network_mode, hosts=tuple(section.allowed_hosts or ()))
    return None


def phase_networks(
    config: TaskConfig, step: StepConfig | None = None, default: NetworkMode = "no-network"
) -> PhaseNetworks:
    """Each phase's policy, as Harbor resolves it; `default` is the environment's, for a task that
    names none (envloop/environments: `default_network`)."""
    baseline = _baseline(config.environment, default)
    agent = _explicit(step.agent if step else None, config.agent) or baseline
    separate = verifier_environment(config, step)
    verifier_baseline = _baseline(separate, default) if separate is not None else None
    verifier = _explicit(step.verifier if step else None, config.verifier) or verifier_baseline or baseline
    return PhaseNetworks(
        baseline=baseline, agent=agent, verifier_baseline=verifier_baseline, verifier=verifier
    )


def verifier_offline_by_design(config: TaskConfig, step: StepConfig | None = None) -> bool:
    """Whether the task's author closed the verifier's network (rather than leaving it to envloop's
    closed default): then network errors in its output are what it checks, not a lack."""
    explicit = _explicit(step.verifier if step else None, config.verifier)
    if explicit is not None:
        return explicit.mode == "no-network"
    section = verifier_environment(config, step) or config.environment
    return section.network_mode == "no-network" or section.allow_internet is False


def task_networks(config: TaskConfig, default: NetworkMode = "no-network") -> list[PhaseNetworks]:
    """The policies of every phase of the task: one set, or one per step."""
    if not config.steps:
        return [phase_networks(config, default=default)]
    return [phase_networks(config, step, default) for step in config.steps]
