"""Operator ceilings over what a task asks for, resolved once per trial into its effective limits.

A task is written by a third party: its `memory_mb`, `storage_mb`, `cpus`, timeouts and network
request are wishes, not orders. The operator of a worker sets maximums with environment variables
(read for every instance through `envloop.settings`, so a test or a restarted worker sees the
current values); whatever a task asks beyond them is cut to the ceiling and the trial says so.
Every timeout is finite.
"""

import functools
import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from envloop.core.trial import VerifierEnvironment
from envloop.environments.base import trial_settings
from envloop.settings import Settings, env_name
from envloop.tasks.model import HarborTask
from envloop.tasks.task_toml import EnvironmentSection

NETWORK_VARIABLE = env_name("trial_network")

DEFAULT_MEMORY_MB = 4096
DEFAULT_DISK_MB = 10240
DEFAULT_TIMEOUT_SEC = 600.0
DEFAULT_PIDS = 1024

TrialNetworkPolicy = Literal["task", "none"]


class OperatorPolicy(BaseModel):
    """The ceilings of this worker, from the operator's settings (`envloop.settings`: safe defaults
    for a shared machine, 8 GB of memory, 10 GB of disk, every CPU and four hours per phase)."""

    model_config = ConfigDict(frozen=True)

    max_memory_mb: int = Field(gt=0)
    max_cpus: float = Field(gt=0)
    cpus_set: bool = Field(default=False, description="the operator chose max_cpus explicitly")
    max_disk_mb: int = Field(gt=0)
    max_timeout_sec: float = Field(gt=0)
    network: TrialNetworkPolicy
    verifier_environment: VerifierEnvironment
    """`separate`: every verifier of this worker's trials runs in a fresh environment, whatever
    the job asked."""


def operator_policy() -> OperatorPolicy:
    """The ceilings from ENVLOOP_MAX_*, ENVLOOP_TRIAL_NETWORK and ENVLOOP_VERIFIER_ENVIRONMENT; a bad
    value fails the trial's setup with a message naming the variable rather than running it unbounded."""
    return _policy_of(trial_settings())


@functools.lru_cache(maxsize=8)
def _policy_of(chosen: Settings) -> OperatorPolicy:
    """The policy of one set of settings (frozen, so one value per environment): a trial asks for it
    at setup and again in its phases, and validating the model each time is most of the cost."""
    return OperatorPolicy(
        max_memory_mb=chosen.max_memory_mb,
        max_cpus=chosen.max_cpus or float(os.cpu_count() or 1),
        cpus_set=chosen.max_cpus is not None,
        max_disk_mb=chosen.max_disk_mb,
        max_timeout_sec=chosen.max_timeout_sec,
        network=chosen.trial_network,
        verifier_environment=chosen.verifier_environment,
    )


class EffectiveLimits(BaseModel):
    """What one trial actually got; recorded on the trial."""

    model_config = ConfigDict(frozen=True)

    memory_mb: int
    cpus: float | None
    disk_mb: int
    pids: int
    agent_timeout_sec: float
    verifier_timeout_sec: float
    network: bool
    """Whether a phase may have the network it asks for (the operator's ceiling)."""

    def describe(self) -> str:
        cpus = "unlimited" if self.cpus is None else f"{self.cpus:g}"
        return (
            f"memory {self.memory_mb} MB, cpus {cpus}, disk {self.disk_mb} MB, pids {self.pids}, "
            f"agent timeout {self.agent_timeout_sec:g} s, verifier timeout {self.verifier_timeout_sec:g} s, "
            f"network {'as each phase asks' if self.network else f'closed by {NETWORK_VARIABLE}=none'}"
        )


def resolve_limits(
    task: HarborTask,
    policy: OperatorPolicy,
    *,
    section: EnvironmentSection | None = None,
    agent_timeout_sec: float | None = None,
    verifier_timeout_sec: float | None = None,
) -> tuple[EffectiveLimits, list[str]]:
    """The trial's limits and a warning for each request that was cut or refused.

    `section` is the environment definition (the task's `[environment]` unless given: a separate
    verifier's has its own resources). `agent_timeout_sec`/`verifier_timeout_sec` are the job's
    overrides (they win over the task's). Which network each phase gets is the task's
    (tasks/phases.py), within `network`."""
    section = section or task.config.environment
    warnings: list[str] = []

    def capped(what: str, asked: float, ceiling: float, unit: str) -> float:
        if asked <= ceiling:
            return asked
        warnings.append(f"{what} {asked:g} {unit} asked, capped at the operator's maximum {ceiling:g} {unit}")
        return ceiling

    memory = int(capped("memory", section.memory_mb or DEFAULT_MEMORY_MB, policy.max_memory_mb, "MB"))
    disk = int(capped("disk", section.storage_mb or DEFAULT_DISK_MB, policy.max_disk_mb, "MB"))
    cpus: float | None = None
    if section.cpus is not None:
        cpus = capped("cpus", section.cpus, policy.max_cpus, "cpus")
    elif policy.cpus_set:
        cpus = policy.max_cpus
    agent = agent_timeout_sec or task.config.agent.timeout_sec or DEFAULT_TIMEOUT_SEC
    verifier = verifier_timeout_sec or task.config.verifier.timeout_sec or DEFAULT_TIMEOUT_SEC
    agent = capped("agent timeout", agent, policy.max_timeout_sec, "s")
    verifier = capped("verifier timeout", verifier, policy.max_timeout_sec, "s")
    limits = EffectiveLimits(
        memory_mb=memory,
        cpus=cpus,
        disk_mb=disk,
        pids=DEFAULT_PIDS,
        agent_timeout_sec=agent,
        verifier_timeout_sec=verifier,
        network=policy.network != "none",
    )
    return limits, warnings
