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

This module checks the params and finds what a trial needs (its agent, its task, its environment's
provider), and keeps the trajectory; the trial itself, phase by phase, is a `TrialRun`
(trial_run.py; docs/design/verdict-pipeline.md).
"""

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from envloop.agents import AGENTS, find_agent
from envloop.core.clock import utc_now
from envloop.core.masking import mask_outcome
from envloop.core.params import ComponentParams, ParamReader, param, params_schema
from envloop.core.status import ErrorType, TrialStatus
from envloop.core.trajectory import ModelStep, TrajectoryRecorder, usage_totals
from envloop.core.trial import (
    MAX_VERIFIER_RUNS,
    VERIFIER_FLAKY_FLAG,
    PhaseRecord,
    TrialError,
    TrialOutcome,
    TrialSpec,
    crashed,
)
from envloop.environments import EnvironmentProvider
from envloop.environments.features import TaskFeature, refuse_unsupported, task_features
from envloop.plugins import ComponentError
from envloop.runners.base import ComponentInfo, TaskKind
from envloop.runners.collection import keep_captures
from envloop.runners.params import check_params, missing_here
from envloop.runners.trial_run import TrialEvent, TrialHook, TrialRun, setup_failed
from envloop.tasks.harbor import load_harbor_task
from envloop.tasks.model import HarborTask
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
def _frozen_task(task_dir: Path, name: str, digest: str | None) -> HarborTask:
    """Frozen task copies never change, so each is parsed once per process; its digest is the one
    the store keeps it under when the spec names it (hashing every file again cost as much as
    parsing it, for each distinct task), else computed."""
    return load_harbor_task(task_dir, name=name, digest=digest)


@functools.lru_cache(maxsize=256)
def _frozen_features(task_dir: Path, name: str, digest: str | None) -> tuple[TaskFeature, ...]:
    """A frozen task copy's features (its Dockerfile and compose file read), found once per process
    for the same reason: every attempt of a task version is checked against the same ones."""
    return tuple(task_features(_frozen_task(task_dir, name, digest)))


class ShellRunner:
    ref = "envloop/shell@1"
    task_kind: TaskKind = "harbor"
    description = "Harbor tasks: an agent works in a local sandbox, then tests/test.sh writes the reward"

    def __init__(self, provider: EnvironmentProvider | None = None) -> None:
        self.provider = provider
        """The provider every trial uses; None: the one its spec names (`environment`)."""
        self._hooks: list[tuple[TrialEvent, TrialHook]] = []

    def add_hook(self, event: TrialEvent, hook: TrialHook) -> None:
        """Observe every trial this runner runs from now on (trial_run.py: `TrialRun.add_hook`)."""
        self._hooks.append((event, hook))

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
            outcome = crashed(exc, phases)  # masked with the rest below
        finally:
            trajectory = recorder.finish(recorder.trajectory.stop_reason)
            spec.artifacts_dir.mkdir(parents=True, exist_ok=True)
            await keep_captures(spec)  # what collection did not reach (a failed or cancelled run)
            write_trajectory(spec.artifacts_dir, trajectory, spec.secret_values)
        outcome.stop_reason = trajectory.stop_reason
        if any(isinstance(step, ModelStep) for step in trajectory.steps):
            outcome.usage = usage_totals(trajectory)
        # Every field a verifier or agent could write into is masked, not only the kept files.
        return mask_outcome(outcome, spec.secret_values)

    async def _run(
        self, spec: TrialSpec, phases: list[PhaseRecord], recorder: TrajectoryRecorder
    ) -> TrialOutcome:
        """What the trial needs (its agent, its task, its environment's provider), then the trial run."""
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

        started = utc_now()
        try:
            # A copy per trial: a multi-step trial moves its own copy from step to step.
            task = _frozen_task(spec.task_dir, spec.task_name, spec.task_digest).model_copy()
            provider, choice_warning = (
                (self.provider, None) if self.provider is not None else await choose_provider(task, spec)
            )
            # Never run a task without what it needs (push and submission refuse it too; this is
            # the last line for jobs that left the environment to the worker).
            honours = getattr(provider, "honours", None)
            features = _frozen_features(spec.task_dir, spec.task_name, spec.task_digest)
            feature_warnings = refuse_unsupported(task, honours, features)
        except Exception as exc:
            return setup_failed(spec, phases, started, exc)
        trial = TrialRun(
            spec=spec,
            task=task,
            agent=agent,
            provider=provider,
            recorder=recorder,
            phases=phases,
            setup_started=started,
            setup_warnings=feature_warnings,
            choice_warning=choice_warning,
        )
        for event, hook in self._hooks:
            trial.add_hook(event, hook)
        return await trial.run()
