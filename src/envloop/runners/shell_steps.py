"""The steps `envloop/shell@1` records itself: the commands of agents that keep no trajectory of
their own (`oracle`, `command`), and the verifier's run.

The commands of an agent without model steps are observed by `CommandRecording`: every command it
runs becomes a tool step with its command line, exit code, whole output and the files it created,
changed or deleted in the working directory. A command cut off by the agent timeout is recorded
too, as interrupted, before the cancellation goes on.
"""

import shlex
import time
from datetime import datetime
from pathlib import Path

from envloop.agents.base import read_outputs
from envloop.core.clock import utc_now
from envloop.core.reward import RewardReading
from envloop.core.trajectory import ToolStep, TrajectoryRecorder, VerifierStep
from envloop.environments.base import CommandRun, ExecResult
from envloop.environments.contract import Environment
from envloop.trajectories import Snapshot, changes_between


class CommandRecording:
    """Records each command the trial's environment runs as a tool step named after the agent
    (handed to the environment as its `CommandObserver` for the agent's run)."""

    def __init__(self, environment: Environment, recorder: TrajectoryRecorder, tool: str) -> None:
        self._environment = environment
        self._recorder = recorder
        self._tool = tool
        self._state: Snapshot = {}
        self.commands = 0

    async def start(self) -> None:
        """Take the working directory's initial state, which the first command's changes are against."""
        self._state = await self._environment.snapshot()

    async def ran(self, run: CommandRun, result: ExecResult | None) -> None:
        self.commands += 1
        if result is not None:
            after = await self._environment.snapshot(self._state)
            self._recorder.add(self._step(run, result, after))
            return
        # Cancelled (the agent timeout, a cancelled job): keep what the command did so far.
        try:
            after = await self._environment.snapshot(self._state)
        except Exception:  # the cancellation goes on whatever the snapshot met
            after = self._state
        step = self._step(run, None, after)
        step.error = "interrupted: the agent phase ended while the command ran"
        self._recorder.add(step)

    def _step(self, call: CommandRun, result: ExecResult | None, after: Snapshot) -> ToolStep:
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
