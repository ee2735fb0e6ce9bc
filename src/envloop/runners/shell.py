"""`envloop/shell@1`: one Harbor task attempt, from environment setup to teardown.

setup → agent (bounded by its timeout) → verifier (`bash /tests/test.sh`, its own timeout; it runs
even after the agent failed or timed out) → reward → artifacts → teardown (always). Every failure of
the trial itself becomes an outcome with an error type; only cancellation propagates, after the
environment has been torn down.
"""

import asyncio
import functools
import os
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from pathlib import Path

from envloop.agents import Agent, AgentContext, agent_names, get_agent
from envloop.core.reward import RewardReading, parse_reward
from envloop.core.trial import PhaseRecord, TrialError, TrialOutcome, TrialSpec
from envloop.environments import Environment, EnvironmentProvider, LocalEnvironmentProvider
from envloop.environments.instance import remove_tree
from envloop.runners.artifacts import copy_tree_masked, mask_text
from envloop.runners.base import RunnerParams, TaskKind
from envloop.tasks.harbor import load_harbor_task
from envloop.tasks.model import HarborTask
from envloop.tasks.variables import resolve_env

DEFAULT_TIMEOUT_SEC = 600.0


@functools.lru_cache(maxsize=256)
def _frozen_task(task_dir: Path, name: str) -> HarborTask:
    """Frozen task copies never change, so each is parsed (and its digest computed) once per process."""
    return load_harbor_task(task_dir, name=name)


INSTRUCTION_VARIABLE_LIMIT = 64 * 1024
_REWARD_READ_LIMIT = 1024 * 1024


def _now() -> datetime:
    return datetime.now(UTC)


def _read_reward_file(path: Path) -> str | None:
    """The start of a reward file, never through a symlink (the sandbox wrote it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"<unreadable: {exc.strerror}>"
    with os.fdopen(fd, "rb") as handle:
        return handle.read(_REWARD_READ_LIMIT).decode("utf-8", errors="replace")


class ShellRunner:
    ref = "envloop/shell@1"
    task_kind: TaskKind = "harbor"
    description = "Harbor tasks: an agent works in a local sandbox, then tests/test.sh writes the reward"

    def __init__(self, provider: EnvironmentProvider | None = None) -> None:
        self.provider: EnvironmentProvider = provider or LocalEnvironmentProvider()

    def params_info(self) -> RunnerParams:
        return RunnerParams(
            read=["AGENT_NAME", "AGENT_COMMAND"],
            required=["AGENT_NAME"],
            notes=[
                f"AGENT_NAME is one of: {', '.join(agent_names())}",
                "AGENT_COMMAND is required when AGENT_NAME=command, which passes every param to it",
            ],
        )

    def check_params(self, params: Mapping[str, str]) -> list[str]:
        name = params.get("AGENT_NAME")
        if not name:
            return ["AGENT_NAME is required"]
        agent = get_agent(name)
        if agent is None:
            return [f"unknown agent {name!r} (known: {', '.join(agent_names())})"]
        return [
            f"{param} is required when AGENT_NAME={name}"
            for param in agent.info.required_params
            if not params.get(param)
        ]

    def unread_params(self, params: Mapping[str, str]) -> list[str]:
        agent = get_agent(params.get("AGENT_NAME", ""))
        if agent is None:
            return sorted(p for p in params if p not in self.params_info().read)
        if agent.info.passes_all_params:
            return []
        read = {"AGENT_NAME", *agent.info.required_params, *agent.info.optional_params}
        return sorted(p for p in params if p not in read)

    async def run(self, spec: TrialSpec) -> TrialOutcome:
        phases: list[PhaseRecord] = []
        try:
            return await self._run(spec, phases)
        except Exception as exc:
            message = mask_text(f"{type(exc).__name__}: {exc}", spec.secret_values)
            error = TrialError(type="infrastructure_error", message=message)
            return TrialOutcome(status="failed", error=error, phases=phases)

    async def _run(self, spec: TrialSpec, phases: list[PhaseRecord]) -> TrialOutcome:
        problems = self.check_params(spec.params)
        agent = get_agent(spec.params.get("AGENT_NAME", ""))
        if problems or agent is None:
            error = TrialError(type="agent_error", message="; ".join(problems))
            return TrialOutcome(status="failed", error=error)
        started = _now()
        context: AbstractAsyncContextManager[Environment] | None = None
        try:
            task = _frozen_task(spec.task_dir, spec.task_name)
            context = self.provider.instance(task, spec)
            environment = await context.__aenter__()
        except Exception as exc:
            phases.append(PhaseRecord(name="setup", started_at=started, ended_at=_now()))
            message = mask_text(f"environment setup failed: {exc}", spec.secret_values)
            error = TrialError(type="environment_error", message=message)
            return TrialOutcome(status="failed", error=error, phases=phases)
        phases.append(PhaseRecord(name="setup", started_at=started, ended_at=_now()))
        try:
            outcome = await self._attempt(environment, task, spec, agent, phases)
        except BaseException as exc:
            await context.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        started = _now()
        try:
            await context.__aexit__(None, None, None)
        except Exception as exc:
            outcome.warnings.append(f"teardown failed: {exc}")
        outcome.phases.append(PhaseRecord(name="teardown", started_at=started, ended_at=_now()))
        outcome.warnings.extend(environment.warnings)
        outcome.sandbox = environment.mode
        outcome.sandbox_note = environment.note
        return outcome

    async def _attempt(
        self,
        environment: Environment,
        task: HarborTask,
        spec: TrialSpec,
        agent: Agent,
        phases: list[PhaseRecord],
    ) -> TrialOutcome:
        agent_error = await self._agent_phase(environment, task, spec, agent, phases)
        reading, verifier_error = await self._verifier_phase(environment, task, spec, phases)
        started = _now()
        paths = environment.paths
        await asyncio.to_thread(self._keep_artifacts, paths.agent_logs, paths.verifier_logs, spec)
        phases.append(PhaseRecord(name="artifacts", started_at=started, ended_at=_now()))
        error = agent_error or verifier_error
        return TrialOutcome(
            status="failed" if error else "completed",
            error=error,
            reward=reading.reward,
            reward_note=reading.note,
            dimensions=reading.dimensions,
            phases=phases,
        )

    @staticmethod
    def _keep_artifacts(agent_logs: Path, verifier_logs: Path, spec: TrialSpec) -> None:
        copy_tree_masked(agent_logs, spec.artifacts_dir / "agent", spec.secret_values)
        copy_tree_masked(verifier_logs, spec.artifacts_dir / "verifier", spec.secret_values)

    async def _agent_phase(
        self,
        environment: Environment,
        task: HarborTask,
        spec: TrialSpec,
        agent: Agent,
        phases: list[PhaseRecord],
    ) -> TrialError | None:
        paths = environment.paths
        instruction_file = paths.tmp / "envloop-instruction.md"
        instruction_file.write_text(task.instruction, encoding="utf-8")
        variables = {"ENVLOOP_INSTRUCTION_FILE": environment.to_visible(instruction_file)}
        if len(task.instruction.encode()) < INSTRUCTION_VARIABLE_LIMIT:
            variables["ENVLOOP_INSTRUCTION"] = task.instruction
        if spec.max_steps is not None:
            variables["ENVLOOP_MAX_STEPS"] = str(spec.max_steps)
        ctx = AgentContext(
            environment=environment,
            task=task,
            spec=spec,
            env=variables,
            stdout_path=paths.agent_logs / "stdout.txt",
            stderr_path=paths.agent_logs / "stderr.txt",
        )
        timeout = spec.agent_timeout_sec or task.config.agent.timeout_sec or DEFAULT_TIMEOUT_SEC
        started = _now()
        try:
            async with asyncio.timeout(timeout) as deadline:
                result = await agent.run(ctx)
        except TimeoutError:
            if not deadline.expired():
                raise
            phases.append(PhaseRecord(name="agent", started_at=started, ended_at=_now(), timed_out=True))
            return TrialError(type="agent_timeout", message=f"the agent exceeded its {timeout:g} s timeout")
        phases.append(
            PhaseRecord(name="agent", started_at=started, ended_at=_now(), exit_code=result.exit_code)
        )
        if result.error is not None:
            return TrialError(type="agent_error", message=result.error, exit_code=result.exit_code)
        if result.exit_code != 0:
            message = f"the agent exited with code {result.exit_code}"
            return TrialError(type="agent_error", message=message, exit_code=result.exit_code)
        return None

    async def _verifier_phase(
        self, environment: Environment, task: HarborTask, spec: TrialSpec, phases: list[PhaseRecord]
    ) -> tuple[RewardReading, TrialError | None]:
        logs = environment.paths.verifier_logs
        # Only the verifier may write a reward: anything the agent left there is discarded.
        remove_tree(logs)
        logs.mkdir()
        started = _now()
        if not (task.tests_dir / "test.sh").is_file():
            phases.append(PhaseRecord(name="verifier", started_at=started, ended_at=_now()))
            reading = RewardReading(reward=None, note="the verifier did not run")
            return reading, TrialError(type="verifier_error", message="task has no tests/test.sh")
        timeout = spec.verifier_timeout_sec or task.config.verifier.timeout_sec or DEFAULT_TIMEOUT_SEC
        result = await environment.exec(
            ["bash", f"{environment.visible.tests}/test.sh"],
            env=resolve_env(task.config.verifier.env, spec.params),
            timeout=timeout,
            stdout_path=logs / "stdout.txt",
            stderr_path=logs / "stderr.txt",
            mounts=frozenset({"tests"}),
        )
        phases.append(
            PhaseRecord(
                name="verifier",
                started_at=started,
                ended_at=_now(),
                exit_code=result.exit_code,
                timed_out=result.timed_out,
            )
        )
        reading = parse_reward(
            _read_reward_file(logs / "reward.txt"), _read_reward_file(logs / "reward.json")
        )
        if result.timed_out:
            message = f"the verifier exceeded its {timeout:g} s timeout"
            return reading, TrialError(type="verifier_timeout", message=message)
        if result.exit_code != 0 and reading.reward is None:
            message = f"the verifier exited with code {result.exit_code} and wrote no reward"
            return reading, TrialError(type="verifier_error", message=message, exit_code=result.exit_code)
        return reading, None
