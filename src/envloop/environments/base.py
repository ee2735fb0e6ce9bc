"""The Environment protocol: where a trial's commands run, and the only way runners, agents and
artifact collection reach the trial's files.

An environment instance is one trial's private world: a bubblewrap sandbox on this host, a plain
process group, or a container. Everything that crosses its boundary goes through the methods below
and names paths as a command inside sees them (`visible`); no caller ever learns, let alone writes
to, a host directory of the instance. Files of the worker (where a command's output is streamed,
where logs are copied out to) are the caller's own and never point into the instance.
"""

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel

from envloop.core.trial import SandboxMode, TrialFlag, TrialSpec
from envloop.settings import Settings, SettingsError, settings
from envloop.tasks.model import HarborTask, NetworkMode, TaskUser

if TYPE_CHECKING:
    from envloop.environments.policy import EffectiveLimits
    from envloop.gateway import ModelGateway
    from envloop.tasks.phases import NetworkPolicy
    from envloop.trajectories.workspace import Snapshot

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


class Environment(Protocol):
    """What runners, agents and artifact collection use. Providers implement it by subclassing
    `envloop.environments.sandbox.EnvironmentBase`, which does what every provider must (variables,
    masking, showing tests and solution only to the commands that need them, network ceilings)."""

    mode: SandboxMode
    visible: VisiblePaths
    warnings: list[str]
    default_network: NetworkMode
    """A phase's network when the task names none: closed in the local sandbox, Harbor's `public`
    in containers (as Harbor defines it there)."""
    flags: list[TrialFlag]
    """What a reader of the trial's reward should know that the instance saw (tamper flags)."""
    limits: "EffectiveLimits"

    @property
    def note(self) -> str | None:
        """What isolates the instance and how its limits hold (recorded on the trial)."""
        ...

    @property
    def network(self) -> "NetworkPolicy":
        """The network policy the next commands get."""
        ...

    async def exec(
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
        """Run `command` to completion (or until `timeout`), killing every process it started then
        (and on cancellation).

        `user` is who it runs as (default: the task's agent user); `cwd` where it starts (default
        `visible.app`); `env` adds to the instance's variables. `mounts` makes a fresh copy of the
        task's tests or solution (or a fresh, empty verifier log directory) visible from this command
        on. Output streams to `stdout_path`/`stderr_path`, files of the worker (never inside the
        instance); the result keeps a tail."""
        ...

    async def write_file(self, path: str, data: bytes) -> None:
        """Create (or replace) the file `path` inside, readable by every user there; its parent
        directories are created. Never writes through a link a command planted."""
        ...

    async def read_file(self, path: str, max_bytes: int) -> bytes | None:
        """The first `max_bytes` of the regular file `path` inside; None when there is none. Never
        reads through a link; OSError when the file cannot be read (a directory, a device)."""
        ...

    async def get_dir(self, path: str, target: Path) -> list[str]:
        """Copy the directory `path` inside to the worker's directory `target` (created; a name
        already taken there gets a numbered sibling): regular files and directories only, never
        through a link, the trial's secrets masked and long files cut (environments/keeping.py). A
        missing `path` copies nothing. Returns one note per file that was cut or left out. Call it
        after `stop()`: the local provider copies nothing while commands may still run."""
        ...

    async def get_path(self, path: str, target: Path) -> list[str]:
        """Copy the file or directory `path` inside to the worker's `target`, masked like
        `get_dir`; nothing when it is missing."""
        ...

    async def put_dir(self, source: Path, path: str) -> None:
        """Copy the worker's directory or file `source` to `path` inside, replacing it."""
        ...

    async def set_network(self, policy: "NetworkPolicy", phase: str = "") -> None:
        """Give the commands from now on `policy`, capped by the operator's ceiling; `phase` names
        who they are for in the instance's note."""
        ...

    async def open_gateway(self, gateway: "ModelGateway", trial_id: str) -> str:
        """Let the next commands reach the worker's model gateway (answering `trial_id`'s token
        only); the gateway's root URL as they reach it. Open until `close_gateway`."""
        ...

    async def close_gateway(self) -> None:
        """The next commands no longer reach the gateway."""
        ...

    async def snapshot(self, previous: "Snapshot | None" = None) -> "Snapshot":
        """The working directory's files now (see envloop.trajectories.workspace); files unchanged
        since `previous` are not read again."""
        ...

    async def stop(self) -> None:
        """Kill every process the instance still runs; its files stay until teardown."""
        ...

    def resource_problem(self) -> str | None:
        """Why a limit was hit since the last call (out of memory, disk quota full), if it was."""
        ...

    def network_shortfall(self) -> str | None:
        """Which allowed destinations the environment could not reach up to the last `stop()`, if
        any: the network it promised was not there, so what was judged was not the agent's doing."""
        ...


class EnvironmentProvider(Protocol):
    """Makes instances. A provider may also say which environment's task features it honours
    (`honours = "docker"`, envloop.environments.features) and offer `verifier_instance(task, spec,
    step)` for separate verifiers; one that says nothing runs only tasks with no such feature."""

    def instance(self, task: HarborTask, spec: TrialSpec) -> AbstractAsyncContextManager[Environment]:
        """A fresh instance; leaving the context kills every process it started and deletes it."""
        ...
