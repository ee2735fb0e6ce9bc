"""The environment contract: where a trial's commands run, and the only way runners, agents and
artifact collection reach the trial's files. docs/design/environment-contract.md tells the whole
story (what a provider implements, the phases it serves, how to add one).

An instance is one trial's private world: a bubblewrap sandbox on this host, a plain process group,
or a container. Everything that crosses its boundary goes through the methods below and names
paths as a command inside sees them (`visible`); no caller ever learns, let alone writes to, a host
directory of the instance. Files of the worker (where a command's output is streamed, where logs
are copied out to) are the caller's own and never point into the instance.

Each public signature and its promise is written once, here. A provider implements the Protocol by
subclassing `EnvironmentBase` (environments/environment_base.py), an explicit subclass of it that
does once what every provider must (variables, masking, bounded output, showing tests and solution
only to the commands that need them, network ceilings) in final methods over a handful of private
hooks; the public methods only a provider can do (`stop`, `snapshot`, the gateway,
`resource_problem`) are abstract here, so a provider that forgets one cannot be instantiated, and
mypy checks the base against this Protocol. Nothing wraps an instance to watch it: a caller that
wants to know of each command (the shell runner records an agent's commands as steps) hands the
instance a `CommandObserver`, so no second class repeats these signatures to forward them.
"""

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from envloop.core.trial import SandboxMode, TrialFlag
from envloop.environments.base import NO_MOUNTS, ExecResult, Mounts, VisiblePaths
from envloop.tasks.model import NetworkMode, TaskUser

if TYPE_CHECKING:
    from envloop.environments.policy import EffectiveLimits
    from envloop.gateway import ModelGateway
    from envloop.tasks.phases import NetworkPolicy
    from envloop.trajectories.workspace import Snapshot


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


class Environment(Protocol):
    """What runners, agents and artifact collection use, and what a provider implements (by
    subclassing `EnvironmentBase`: see the module's docstring)."""

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

    def observe(self, observer: CommandObserver | None) -> None:
        """Tell `observer` of every command `exec` runs from now on (None: of none)."""
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

    @abstractmethod
    async def open_gateway(self, gateway: "ModelGateway", trial_id: str) -> str:
        """Let the next commands reach the worker's model gateway (answering `trial_id`'s token
        only); the gateway's root URL as they reach it. Open until `close_gateway`."""
        ...

    @abstractmethod
    async def close_gateway(self) -> None:
        """The next commands no longer reach the gateway."""
        ...

    @abstractmethod
    async def snapshot(self, previous: "Snapshot | None" = None) -> "Snapshot":
        """The working directory's files now (see envloop.trajectories.workspace); files unchanged
        since `previous` are not read again."""
        ...

    @abstractmethod
    async def stop(self) -> None:
        """Kill every process the instance still runs; its files stay until teardown."""
        ...

    @abstractmethod
    def resource_problem(self) -> str | None:
        """Why a limit was hit since the last call (out of memory, disk quota full), if it was."""
        ...

    def network_shortfall(self) -> str | None:
        """Which allowed destinations the environment could not reach up to the last `stop()`, if
        any: the network it promised was not there, so what was judged was not the agent's doing.
        None by default: an environment whose network is all or nothing has no allowed host to miss."""
        return None
