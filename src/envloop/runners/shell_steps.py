"""The steps `envloop/shell@1` records itself: the commands of agents that keep no trajectory of
their own (`oracle`, `command`), and the verifier's run.

An agent without model steps sees the environment through `RecordingEnvironment`: every command it
runs becomes a tool step with its command line, exit code, whole output and the files it created,
changed or deleted in the working directory. A command cut off by the agent timeout is recorded
too, as interrupted, before the cancellation goes on.
"""

import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from envloop.agents.base import read_outputs
from envloop.core.clock import utc_now
from envloop.core.reward import RewardReading
from envloop.core.trajectory import ToolStep, TrajectoryRecorder, VerifierStep
from envloop.environments.base import NO_MOUNTS, ExecResult, Mounts
from envloop.environments.contract import Environment
from envloop.tasks.model import TaskUser
from envloop.tasks.phases import NetworkPolicy
from envloop.trajectories import Snapshot, changes_between

if TYPE_CHECKING:
    from envloop.gateway import ModelGateway  # aiohttp: loaded when a trial first routes a model


@dataclass(frozen=True)
class _Call:
    """One command an agent ran, as its tool step needs it: what, when, and where its output went."""

    command: Sequence[str]
    started: datetime
    clock: float
    """`time.perf_counter()` at its start: the step's duration, whatever the wall clock does."""
    stdout_path: Path | None
    stderr_path: Path | None


class RecordingEnvironment:
    """The trial's environment, recording each `exec` as a tool step named after the agent."""

    def __init__(self, inner: Environment, recorder: TrajectoryRecorder, tool: str) -> None:
        self._inner = inner
        self._recorder = recorder
        self._tool = tool
        self._state: Snapshot = {}
        self.commands = 0
        self.mode = inner.mode
        self.visible = inner.visible
        self.warnings = inner.warnings
        self.default_network = inner.default_network
        self.flags = inner.flags
        self.limits = inner.limits

    async def start(self) -> None:
        """Take the working directory's initial state, which the first command's changes are against."""
        self._state = await self._inner.snapshot()

    async def write_file(self, path: str, data: bytes) -> None:
        await self._inner.write_file(path, data)

    async def read_file(self, path: str, max_bytes: int) -> bytes | None:
        return await self._inner.read_file(path, max_bytes)

    async def get_dir(self, path: str, target: Path) -> list[str]:
        return await self._inner.get_dir(path, target)

    async def get_path(self, path: str, target: Path) -> list[str]:
        return await self._inner.get_path(path, target)

    async def put_dir(self, source: Path, path: str) -> None:
        await self._inner.put_dir(source, path)

    async def open_gateway(self, gateway: "ModelGateway", trial_id: str) -> str:
        return await self._inner.open_gateway(gateway, trial_id)

    async def close_gateway(self) -> None:
        await self._inner.close_gateway()

    @property
    def note(self) -> str | None:
        return self._inner.note

    @property
    def network(self) -> NetworkPolicy:
        return self._inner.network

    async def set_network(self, policy: NetworkPolicy, phase: str = "") -> None:
        await self._inner.set_network(policy, phase)

    async def snapshot(self, previous: Snapshot | None = None) -> Snapshot:
        return await self._inner.snapshot(previous)

    async def stop(self) -> None:
        await self._inner.stop()

    def resource_problem(self) -> str | None:
        return self._inner.resource_problem()

    def network_shortfall(self) -> str | None:
        return self._inner.network_shortfall()

    async def exec(  # noqa: PLR0913  # the Environment contract's own signature, its options keyword-only
        self,
        command: Sequence[str],
        *,
        user: TaskUser | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdout_path: Path | None = None,
        stderr_path: Path | None = None,
        mounts: Mounts = NO_MOUNTS,
    ) -> ExecResult:
        self.commands += 1
        call = _Call(command, utc_now(), time.perf_counter(), stdout_path, stderr_path)
        try:
            result = await self._inner.exec(
                command,
                user=user,
                cwd=cwd,
                env=env,
                timeout=timeout,
                stdout_path=stdout_path,
                stderr_path=stderr_path,
                mounts=mounts,
            )
        except BaseException:
            # Cancelled (the agent timeout, a cancelled job): keep what the command did so far.
            try:
                after = await self._inner.snapshot(self._state)
            except Exception:  # the cancellation goes on whatever the snapshot met
                after = self._state
            step = self._step(call, None, after)
            step.error = "interrupted: the agent phase ended while the command ran"
            self._recorder.add(step)
            raise
        after = await self._inner.snapshot(self._state)
        self._recorder.add(self._step(call, result, after))
        return result

    def _step(self, call: "_Call", result: ExecResult | None, after: Snapshot) -> ToolStep:
        duration = (time.perf_counter() - call.clock) * 1000
        stdout, stderr, truncated = read_outputs(call.stdout_path, call.stderr_path, result)
        changes, self._state = changes_between(self._state, after), after
        return ToolStep(
            at=call.started,
            duration_ms=duration,
            call_id=f"{self._tool}_{self.commands}",
            tool=self._tool,
            command=shlex.join(call.command),
            exit_code=result.exit_code if result else None,
            timed_out=result.timed_out if result else False,
            stdout=stdout,
            stderr=stderr,
            output_truncated=truncated,
            changes=changes,
        )


def verifier_step(
    command: str,
    started: datetime,
    result: ExecResult | None,
    logs: Path,
    reading: RewardReading,
) -> VerifierStep:
    """The verifier's run as a step: its whole output from the verifier logs, and its reward."""
    stdout, stderr, truncated = read_outputs(logs / "stdout.txt", logs / "stderr.txt", result)
    return VerifierStep(
        at=started,
        duration_ms=(utc_now() - started).total_seconds() * 1000,
        command=command,
        exit_code=result.exit_code if result else None,
        timed_out=result.timed_out if result else False,
        stdout=stdout,
        stderr=stderr,
        output_truncated=truncated,
        reward=reading.reward,
        reward_note=reading.note,
        dimensions=reading.dimensions,
    )
