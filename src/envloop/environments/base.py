"""The values every environment speaks in: what a command is shown (`Mount`), how it ended
(`ExecResult` for callers, `RunOutcome` from a provider), what a path is (`PathKind`), the
instance's paths as a command inside names them (`VisiblePaths`), what an observer is told
(`CommandRun`), and the one error a setup raises. The contract that uses them is
environments/contract.py."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel

from envloop.settings import Settings, SettingsError, settings

Mount = Literal["tests", "solution", "verifier_logs", "fresh_home", "fresh_tmp"]
"""What a command is shown fresh: the task's tests or solution (read-only), an empty verifier log
directory, an empty HOME of its own (`fresh_home`: nothing an agent left in its HOME, such as a
Python user site, a shell start-up file or a git configuration, runs as part of the verifier), or an
empty `/tmp` of its own where the environment can give one (`fresh_tmp`: asked for a job that wants
its verifiers apart from the agent, where no separate environment exists; Harbor's shared verifier
sees the agent's `/tmp`, as its authors mean)."""
Mounts = frozenset[Mount]
NO_MOUNTS: Mounts = frozenset()

OUTPUT_TAIL_BYTES = 64 * 1024


class ExecResult(BaseModel):
    """How one command ended. `exit_code` is None when it was killed on timeout."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_sec: float
    stdout_whole: bool = False
    stderr_whole: bool = False
    """True when `stdout`/`stderr` hold the command's whole output, not only its tail, so a
    trajectory can keep it without reading the capture file again."""


class RunOutcome(BaseModel):
    """How one command ended, as a provider reports it: None exit code when killed on timeout."""

    exit_code: int | None
    timed_out: bool


PathKind = Literal["file", "directory", "other"]
"""What a path inside is, never following a link at its end (`other`: a link, device, socket…)."""


@dataclass(frozen=True)
class CommandRun:
    """One command an instance ran, as an observer is told of it: what, when, where its output went."""

    command: Sequence[str]
    started: datetime
    clock: float
    """`time.perf_counter()` at its start: the command's duration, whatever the wall clock does."""
    stdout_path: Path | None
    stderr_path: Path | None


class CommandObserver(Protocol):
    """Told of each command an instance runs while it observes (`Environment.observe`)."""

    async def ran(self, run: CommandRun, result: ExecResult | None) -> None:
        """`run` ended with `result`, or was cut off (None: cancelled, or its provider failed);
        the exception goes on after this returns."""
        ...


class VisiblePaths(BaseModel):
    """The instance's directories as a command inside the environment names them. The agent's logs
    are `{logs}/agent`, the verifier's `{logs}/verifier`."""

    app: str
    logs: str
    tests: str
    solution: str
    tmp: str
    home: str

    @property
    def agent_logs(self) -> str:
        return f"{self.logs.rstrip('/')}/agent"

    @property
    def verifier_logs(self) -> str:
        return f"{self.logs.rstrip('/')}/verifier"


class EnvironmentSetupError(RuntimeError):
    """The instance could not be prepared (the runner reports `environment_error`)."""


def trial_settings() -> Settings:
    """The operator's settings as a trial reads them at its setup: a bad value fails that trial's
    setup (`environment_error`) with the line naming the variable, never runs it unbounded."""
    try:
        return settings()
    except SettingsError as exc:
        raise EnvironmentSetupError(str(exc)) from None
