"""The Environment protocol: where a trial's commands run.

An environment instance is one trial's private world. Runners and agents only ever call `exec`;
whether that lands in a bubblewrap sandbox, a plain process group or (later) a container is the
provider's business. Host paths (`paths`) are for the runner to prepare and collect files; the
paths a command sees (`visible`) may differ, so agents must only hand `visible` paths to commands.
"""

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel

from envloop.core.trial import SandboxMode, TrialSpec
from envloop.tasks.model import HarborTask, TaskUser

if TYPE_CHECKING:
    from envloop.environments.policy import EffectiveLimits

Mount = Literal["tests", "solution", "verifier_logs"]
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


class InstancePaths(BaseModel):
    """Host-side directories of one instance; all of them live under `root` and go at teardown.

    `root` itself belongs to the worker: a trial can write below `app`, `tmp` and `logs` but can
    create nothing next to them, so `tests`, `solution` and `verifier_logs` are made only by the
    worker, fresh for the phase that needs them."""

    root: Path
    app: Path
    logs: Path
    tests: Path
    solution: Path
    tmp: Path
    home: Path
    verifier_logs: Path

    @property
    def agent_logs(self) -> Path:
        return self.logs / "agent"


class VisiblePaths(BaseModel):
    """The same directories as a command inside the environment names them."""

    app: str
    logs: str
    tests: str
    solution: str
    tmp: str
    home: str


class EnvironmentSetupError(RuntimeError):
    """The instance could not be prepared (the runner reports `environment_error`)."""


class Environment(Protocol):
    mode: SandboxMode
    note: str | None
    paths: InstancePaths
    visible: VisiblePaths
    warnings: list[str]
    limits: "EffectiveLimits"

    def to_visible(self, host_path: Path) -> str:
        """The name a command inside the environment uses for a file under `paths.root`."""
        ...

    async def exec(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdout_path: Path | None = None,
        stderr_path: Path | None = None,
        mounts: Mounts = NO_MOUNTS,
        user: TaskUser | None = None,
    ) -> ExecResult:
        """Run `command` to completion (or until `timeout`), killing its whole process tree then.

        `env` adds to the instance's variables; `mounts` makes a fresh copy of the task's tests or
        solution (or a fresh verifier log directory) visible for this command only; `user` is who
        it runs as (default: the task's agent user). Output streams to the given files; the result
        keeps a tail.
        """
        ...

    async def stop(self) -> None:
        """Kill every process the instance still runs; its files stay until teardown."""
        ...

    def resource_problem(self) -> str | None:
        """Why a limit was hit since the last call (out of memory, disk quota full), if it was."""
        ...


class EnvironmentProvider(Protocol):
    def instance(self, task: HarborTask, spec: TrialSpec) -> AbstractAsyncContextManager[Environment]:
        """A fresh instance; leaving the context kills every process it started and deletes it."""
        ...
