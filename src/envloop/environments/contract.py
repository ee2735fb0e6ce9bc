"""The environment contract: where a trial's commands run, and the only way runners, agents and
artifact collection reach the trial's files. docs/design/environment-contract.md tells the whole
story (what a provider implements, the phases it serves, how to add one).

An instance is one trial's private world: a bubblewrap sandbox on this host, a plain process group,
or a container. Everything that crosses its boundary goes through the public methods below and
names paths as a command inside sees them (`visible`); no caller ever learns, let alone writes to, a
host directory of the instance. Files of the worker (where a command's output is streamed, where
logs are copied out to) are the caller's own and never point into the instance.

`Environment` is one abstract class, so each signature and its promise is written once: callers
type against it, and a provider subclasses it, implementing the abstract methods (the public ones
only a provider can do, `stop`, `snapshot`, the gateway, `resource_problem`, and private hooks that
run one command, move bytes, place a directory and apply a network). A provider that forgets one
cannot be instantiated. The public methods every caller uses are final and do once what no provider
may get wrong, so a plugin cannot skip it:

- the variables: the provider's defaults, the task's `[environment] env`, then envloop's trial
  variables, each name and value checked (environments/variables.py);
- what leaves is masked: the output tails every caller sees, and every file copied out (through
  environments/outgoing.py and environments/keeping.py, which also cuts runaway logs and never
  follows a link);
- captured output is bounded while it is written (environments/capture.py): a provider's `_run`
  writes into a `BoundedWriter`, never into a file directly, so no command's output can fill the
  host's disk before it ends;
- the tests and the solution are shown only to the commands that need them: a fresh copy for that
  command, removed before any later command runs, and a verifier's log directory the agent never had
  (environments/fresh_mounts.py);
- network policies: the operator's ceiling applies to every phase, and each switch is recorded.

Nothing wraps an instance to watch it: a caller that wants to know of each command (the shell
runner records an agent's commands as steps) hands it a `CommandObserver`.
"""

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, final

from envloop.core.clock import utc_now
from envloop.core.trial import SandboxMode, TrialFlag, TrialSpec
from envloop.environments.base import (
    NO_MOUNTS,
    CommandObserver,
    CommandRun,
    EnvironmentSetupError,
    ExecResult,
    Mounts,
    PathKind,
    RunOutcome,
    VisiblePaths,
)
from envloop.environments.capture import BoundedWriter
from envloop.environments.fresh_mounts import FreshMounts
from envloop.environments.keeping import MAX_KEPT_FILE_BYTES, MAX_KEPT_FILES, KeepBudget
from envloop.environments.outgoing import Outgoing
from envloop.environments.policy import NETWORK_VARIABLE, EffectiveLimits
from envloop.environments.variables import checked_env, instance_variables
from envloop.tasks.model import HarborTask
from envloop.tasks.phases import NO_NETWORK, NetworkPolicy
from envloop.tasks.task_toml import NetworkMode, TaskUser

if TYPE_CHECKING:
    from envloop.core.destinations import Destination
    from envloop.gateway import ModelGateway
    from envloop.trajectories.workspace import Snapshot


class Environment(ABC):
    """One instance of a trial's environment: what runners, agents and artifact collection use,
    and what a provider subclasses (see the module's docstring)."""

    default_network: NetworkMode = "no-network"
    """A phase's network when the task names none: closed in the local sandbox, Harbor's `public`
    in containers (as Harbor defines it there)."""
    mode: SandboxMode

    def __init__(
        self,
        *,
        task: HarborTask,
        spec: TrialSpec,
        visible: VisiblePaths,
        limits: EffectiveLimits,
        note: str,
        warnings: list[str],
        defaults: Mapping[str, str],
        network: NetworkPolicy = NO_NETWORK,
        fresh_home: str = "/verifier-home",
        fresh_tmp: str | None = None,
    ) -> None:
        self.visible = visible
        self.limits = limits
        self._note = note
        self.warnings = warnings
        self.flags: list[TrialFlag] = []
        """What a reader of the trial's reward should know that the instance saw (tamper flags)."""
        self._network = network
        self._task = task
        self._variables = instance_variables(defaults, task, spec, visible)
        self.kept = KeepBudget(files=MAX_KEPT_FILES, bytes=limits.disk_mb << 20)
        """What the trial may still keep: captured output and copied files count against its disk
        quota, and against a cap on the number of files."""
        self._outgoing = Outgoing(self.kept, warnings, spec.secret_values)
        self.fresh_home = fresh_home
        """Where a command shown `fresh_home` finds its empty HOME."""
        self.fresh_tmp = fresh_tmp
        """The provider's own name for a command's empty `/tmp` (None: it cannot give one)."""
        self._mounts = FreshMounts(task, visible, fresh_home, fresh_tmp)
        self._observer: CommandObserver | None = None
        self._network_log: list[str] = []
        """Each phase's policy, in order (`agent public`), for the note."""

    @property
    @final
    def network(self) -> NetworkPolicy:
        """The policy the next commands get (the provider started the instance with it); only
        `set_network` and `enter_network` change it, after the provider applied it."""
        return self._network

    @property
    @final
    def note(self) -> str:
        """What isolates the instance and how its limits hold, then each phase's network (recorded
        on the trial)."""
        if not self._network_log:
            return self._note
        return f"{self._note}; network: {', '.join(self._network_log)}"

    # ---- what every caller uses -----------------------------------------------------------------

    @final
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
        observer = self._observer
        run = CommandRun(command, utc_now(), time.perf_counter(), stdout_path, stderr_path)
        try:
            await self._mounts.show(mounts, self._prepare)
            variables = checked_env({**self._variables, **self.network_variables(), **(env or {})})
            if "fresh_home" in mounts:
                variables["HOME"] = self.fresh_home
            result = await self._outgoing.run(
                run,
                lambda stdout, stderr: self._run(
                    command,
                    user=user,
                    cwd=cwd or self.visible.app,
                    env=variables,
                    timeout=timeout,
                    stdout=stdout,
                    stderr=stderr,
                ),
            )
        except BaseException:
            if observer is not None:
                await observer.ran(run, None)
            raise
        if observer is not None:
            await observer.ran(run, result)
        return result

    @final
    def observe(self, observer: CommandObserver | None) -> None:
        """Tell `observer` of every command `exec` runs from now on (None: of none)."""
        self._observer = observer

    @final
    async def write_file(self, path: str, data: bytes) -> None:
        """Create (or replace) the file `path` inside, readable by every user there; its parent
        directories are created. Never writes through a link a command planted."""
        await self._write(_checked_path(path), data)

    @final
    async def read_file(self, path: str, max_bytes: int) -> bytes | None:
        """The first `max_bytes` of the regular file `path` inside; None when there is none. Never
        reads through a link; OSError when the file cannot be read (a directory, a device)."""
        return await self._read(_checked_path(path), max_bytes)

    @final
    async def put_dir(self, source: Path, path: str) -> None:
        """Copy the worker's directory or file `source` to `path` inside, replacing it."""
        await self._copy_in(source, _checked_path(path))

    @final
    async def get_dir(self, path: str, target: Path) -> list[str]:
        """Copy the directory `path` inside to the worker's directory `target` (created; a name
        already taken there gets a numbered sibling): regular files and directories only, never
        through a link, the trial's secrets masked and long files cut (environments/keeping.py). A
        missing `path` copies nothing. Returns one note per file that was cut or left out. Call it
        after `stop()`: the local provider copies nothing while commands may still run."""
        return await self._outgoing.copy_dir(
            lambda raw: self._copy_out(_checked_path(path), raw, self.kept), path, target
        )

    @final
    async def get_path(self, path: str, target: Path) -> list[str]:
        """Copy the file or directory `path` inside to the worker's `target`, masked like
        `get_dir`; nothing when it is missing."""
        kind = await self._kind(_checked_path(path))
        if kind == "directory":
            return await self.get_dir(path, target)
        if kind == "other":
            return [self._outgoing.mask(f"{path}: not a regular file or directory: not kept")]
        if kind is None or (data := await self._read(path, MAX_KEPT_FILE_BYTES + 1)) is None:
            return []
        return self._outgoing.keep_file(data, path, target)

    @final
    async def set_network(self, policy: NetworkPolicy, phase: str = "") -> None:
        """Give the commands from now on `policy`, capped by the operator's ceiling; `phase` names
        who they are for in the instance's note."""
        if policy.mode != "no-network" and not self.limits.network:
            asked = f"the trial ran without the network it asked for ({policy.describe()})"
            self._outgoing.warn_once(f"{NETWORK_VARIABLE}=none: {asked}")
            policy = NO_NETWORK
        if phase:
            self._network_log.append(f"{phase} {policy.describe()}")
        if policy == self._network:
            return
        await self._apply_network(policy)
        self._network = policy

    @final
    async def enter_network(self, policy: NetworkPolicy) -> None:
        """Apply `policy` whatever the instance believes is in force (a provider that started it on
        a network of its own calls this once, to reach the baseline)."""
        await self._apply_network(policy)
        self._network = policy

    def network_variables(self) -> dict[str, str]:
        """Variables the network in force needs (an allowlist's proxy); none by default."""
        return {}

    def network_shortfall(self) -> str | None:
        """Which allowed destinations the environment could not reach up to the last `stop()`, if
        any: the network it promised was not there, so what was judged was not the agent's doing.
        None by default: an environment whose network is all or nothing has no allowed host to miss."""
        return None

    def destinations(self) -> "list[Destination] | None":
        """What the instance's commands asked its egress proxies for, once it is torn down; None
        when no proxy observed them (the default: the local sandbox's networks have none)."""
        return None

    # ---- what only a provider can do --------------------------------------------------------------

    @abstractmethod
    async def open_gateway(self, gateway: "ModelGateway", trial_id: str) -> str:
        """Let the next commands reach the worker's model gateway (answering `trial_id`'s token
        only); the gateway's root URL as they reach it. Open until `close_gateway`."""

    @abstractmethod
    async def close_gateway(self) -> None:
        """The next commands no longer reach the gateway."""

    @abstractmethod
    async def snapshot(self, previous: "Snapshot | None" = None) -> "Snapshot":
        """The working directory's files now (see envloop.trajectories.workspace); files unchanged
        since `previous` are not read again."""

    @abstractmethod
    async def stop(self) -> None:
        """Kill every process the instance still runs; its files stay until teardown."""

    @abstractmethod
    def resource_problem(self) -> str | None:
        """Why a limit was hit since the last call (out of memory, disk quota full), if it was."""

    @abstractmethod
    async def _run(
        self,
        command: Sequence[str],
        *,
        user: TaskUser | None,
        cwd: str,
        env: dict[str, str],
        timeout: float | None,
        stdout: BoundedWriter,
        stderr: BoundedWriter,
    ) -> RunOutcome:
        """Run `command` to its end (or `timeout`), writing its output as it comes to the two
        writers (the worker's files, bounded), killing every process it started on timeout or
        cancellation. `user` None means the task's agent user."""

    @abstractmethod
    async def _write(self, path: str, data: bytes) -> None:
        """Create or replace the file `path`, readable by every user; never through a link."""

    @abstractmethod
    async def _read(self, path: str, max_bytes: int) -> bytes | None:
        """The first `max_bytes` of the regular file `path`; None when there is none; OSError when
        it cannot be read. Never through a link."""

    @abstractmethod
    async def _copy_out(self, path: str, target: Path, budget: KeepBudget) -> list[str]:
        """Copy the directory `path` to the new worker directory `target`: directories and regular
        files only, never through a link, no more than `budget` allows (charging it). A missing
        `path` copies nothing. One note per entry left out. The base class masks what arrives."""

    @abstractmethod
    async def _kind(self, path: str) -> PathKind | None:
        """What `path` is (never following a link at its end); None when nothing is there."""

    @abstractmethod
    async def _copy_in(self, source: Path, path: str) -> None:
        """Make `path` a copy of the worker's file or directory `source` (replacing what was there,
        parents created), owned by root and readable by every user."""

    @abstractmethod
    async def _place(self, path: str, layers: Sequence[Path] | None) -> None:
        """Make `path` a fresh directory: the `layers` laid over each other, owned by root and
        read-only for everyone else, or (None) empty and writable by every user. Whatever a
        command left at `path` goes first."""

    @abstractmethod
    async def _clear(self, path: str) -> None:
        """Remove `path` and everything below it."""

    @abstractmethod
    async def _apply_network(self, policy: NetworkPolicy) -> None:
        """Switch the instance to `policy` (already checked and capped by the base class)."""

    async def _prepare(self, gone: list[str], fresh: list[tuple[str, Sequence[Path] | None]]) -> None:
        """Clear each of `gone`, then place each of `fresh`; a provider may do it all at once."""
        for path in gone:
            await self._clear(path)
        for path, layers in fresh:
            await self._place(path, layers)


def _checked_path(path: str) -> str:
    if not path.startswith("/") or "\0" in path:
        raise EnvironmentSetupError(f"{path[:200]!r} is not an absolute path inside the environment")
    return path
