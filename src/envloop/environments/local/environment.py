"""One instance of the `local` environment: a bubblewrap sandbox per command, or (only when the
operator asks for it with ENVLOOP_SANDBOX=plain) a plain process group. Made by
`LocalEnvironmentProvider` (provider.py).

Each `exec` is exactly one process started on the host (spawn.py; its output read from pipes on the
event loop into bounded writers, environments/capture.py): a launcher (see launch.py) that joins
the instance's cgroups, lowers its rlimits, drops to the instance's host uid and starts bwrap, so
nothing on the hot path polls, sleeps or probes. Each command has its own namespaces, so a phase's
network policy is simply the one its commands start with: loopback only, or a network of their own
(pasta). The tests, the solution and the verifier's log directory are host directories of the
worker's, bound into exactly the commands the base class shows them to.
"""

import asyncio
import contextlib
import os
import posixpath
import shutil
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from envloop.core.posix_paths import within
from envloop.core.trial import SandboxMode, TrialSpec
from envloop.environments.base import EnvironmentSetupError, PathKind, RunOutcome, VisiblePaths
from envloop.environments.capture import BoundedWriter, PipePump
from envloop.environments.contract import Environment
from envloop.environments.keeping import (
    INLINE_ENTRIES,
    KeepBudget,
    copy_tree_masked,
    move_plain_tree,
    small_plain_tree,
)
from envloop.environments.local import instance as files
from envloop.environments.local import quota, spawn
from envloop.environments.local.cgroup2 import UnifiedCgroup
from envloop.environments.local.identity import DEFAULT_AGENT_UID, HOST_UIDS, sandbox_uid
from envloop.environments.local.instance import InstancePaths
from envloop.environments.local.launch import LAUNCH_CWD, LAUNCH_ENV, Launcher, open_capture, read_inside
from envloop.environments.local.limits import InstanceCgroups
from envloop.environments.local.on_loop import frees_little
from envloop.environments.local.stragglers import InstanceProcesses
from envloop.environments.policy import EffectiveLimits
from envloop.environments.procs import MARKER_VARIABLE, kill_group
from envloop.tasks.model import HarborTask
from envloop.tasks.phases import NetworkPolicy
from envloop.tasks.task_toml import TaskUser
from envloop.trajectories.workspace import Snapshot, snapshot

if TYPE_CHECKING:
    from envloop.gateway import ModelGateway  # aiohttp: loaded when a trial first routes a model

_FRESH_TMP = "/verifier-tmp"
"""How the instance names the verifier's own `/tmp` (bound at `/tmp`, where the command sees it)."""
INLINE_SNAPSHOT_FILES = 500
_DRAIN_SEC = 0.5
"""How long the output of a command that ended is read on before what still holds it is ignored."""

LauncherFor = Callable[[bool, int | None], Launcher]
"""The instance's launcher for commands with a network of their own (True) or loopback alone, and the
host port of the model gateway they reach on their loopback (None: none)."""


class LocalEnvironment(Environment):
    """One run's instance. Build it through `LocalEnvironmentProvider.instance`."""

    def __init__(
        self,
        *,
        mode: SandboxMode,
        task: HarborTask,
        spec: TrialSpec,
        note: str,
        paths: InstancePaths,
        visible: VisiblePaths,
        warnings: list[str],
        limits: EffectiveLimits,
        defaults: dict[str, str],
        network: NetworkPolicy,
        cgroups: InstanceCgroups | UnifiedCgroup,
        launcher_for: LauncherFor,
        agent_uid: int,
        host_uid: int | None,
        quota_mounted: bool,
    ) -> None:
        super().__init__(
            task=task,
            spec=spec,
            visible=visible,
            limits=limits,
            note=note,
            warnings=warnings,
            defaults=defaults,
            network=network,
            fresh_home="/verifier-home" if mode == "bwrap" else str(paths.verifier_home),
            fresh_tmp=_FRESH_TMP if mode == "bwrap" else None,
        )
        self.mode: SandboxMode = mode
        self.paths = paths
        """The instance's host directories: this provider's own business, never its callers'."""
        self._cgroups = cgroups
        self._launcher_for = launcher_for
        self._launcher = launcher_for(network.mode == "public", None)
        self._gateway_port: int | None = None
        self._run_id = spec.run_id
        self._agent_uid = agent_uid
        self.host_uid = host_uid
        """The instance's own host uid (None: the worker's user, when it cannot switch)."""
        self._quota_mounted = quota_mounted
        self._oom_seen = cgroups.oom_kills()
        self._processes = InstanceProcesses(cgroups, host_uid, spec.run_id, plain=mode == "plain")
        self._running: set[int] = set()
        self._pumps: set[PipePump] = set()
        """Pipes of commands' output still read: a command's own until it ends, a leftover's until
        the instance stops."""
        self._stopped = False
        self._binds: dict[str, list[str]] = {}
        """The bwrap binds of what the base class shows the next commands (tests, solution, logs)."""
        self._unseen_tests = mode == "bwrap" and not task.steps and paths.tests.is_dir()
        """The tests copied at setup were never bound into a command: the verifier can have them."""

    def _host_path(self, path: str) -> Path:
        """The host file behind a path as a command names it; only the instance's own directories
        are reachable this way (an absolute path that leaves them, or climbs out with `..`, is
        refused)."""
        normal = posixpath.normpath(path)
        pairs = [
            (self.fresh_home, self.paths.verifier_home),
            (_FRESH_TMP, self.paths.verifier_tmp),
            (self.visible.verifier_logs, self.paths.verifier_logs),
            (self.visible.home, self.paths.home),
            (self.visible.tmp, self.paths.tmp),
            (self.visible.app, self.paths.app),
            (self.visible.logs, self.paths.logs),
            (self.visible.tests, self.paths.tests),
            (self.visible.solution, self.paths.solution),
        ]
        for seen_as, host_dir in pairs:
            if within(normal, seen_as):  # `normal` has no `..` left: what follows `seen_as` is below it
                relative = normal[len(seen_as.rstrip("/")) :].lstrip("/")
                return host_dir / relative if relative else host_dir
        raise EnvironmentSetupError(f"{path[:200]!r} is not a path of the instance's own directories")

    def _step_uid(self) -> int:
        return sandbox_uid(self._task.agent_user, DEFAULT_AGENT_UID, "[steps.agent] user")

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
        self._stopped = False
        # A multi-step task's steps may name their own agent user.
        default = self._agent_uid if self._task.step is None else self._step_uid()
        uid = sandbox_uid(user, default, "user")
        binds = [arg for bind in self._binds.values() for arg in bind]
        if self.mode == "bwrap":
            binds += ["--uid", str(uid), "--gid", str(uid)]
        else:
            # The marker goes last so no caller can hide a process from teardown.
            env = {**env, MARKER_VARIABLE: self._run_id}
        argv, inherited = self._launcher.argv(command, env, cwd, binds)
        (out_read, out_write), (err_read, err_write) = os.pipe(), os.pipe()
        pumps = [PipePump(out_read, stdout), PipePump(err_read, stderr)]
        self._pumps.update(pumps)
        try:
            proc = spawn.start(
                argv,
                stdout=out_write,
                stderr=err_write,
                env=LAUNCH_ENV,
                cwd=LAUNCH_CWD,
                pass_fds=inherited,
            )
        except BaseException:
            for pump in pumps:
                pump.close()
            raise
        finally:
            for fd in (out_write, err_write, *inherited):
                os.close(fd)
        timed_out = await self._wait(proc, timeout)
        await self._drain(pumps)
        return RunOutcome(exit_code=None if timed_out else _exit_code(proc.returncode), timed_out=timed_out)

    async def _drain(self, pumps: list[PipePump]) -> None:
        """Read the command's output to its end. A process it left behind (plain mode: a daemon
        that kept its stdout) may hold the pipe open: after `_DRAIN_SEC` what it writes is read and
        dropped until the instance stops, so it neither blocks nor dies of a closed pipe."""
        if not all(pump.ended.done() for pump in pumps):  # most commands' pipes ended with them
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_DRAIN_SEC):
                    await asyncio.gather(*(pump.ended for pump in pumps))
        self._pumps.difference_update(pump for pump in pumps if pump.ended.done())

    def _close_pumps(self) -> None:
        for pump in self._pumps:
            pump.close()
        self._pumps.clear()

    async def _apply_network(self, policy: NetworkPolicy) -> None:
        if policy.mode == "allowlist":
            raise EnvironmentSetupError("the local environment cannot enforce a network allowlist")
        self._launcher = self._launcher_for(policy.mode == "public", self._gateway_port)

    async def open_gateway(self, gateway: "ModelGateway", trial_id: str) -> str:
        """The gateway listens on the host's loopback; pasta forwards its port to each command's
        own loopback, in a namespace with no route anywhere else unless the phase is public."""
        if self.mode == "plain":
            return f"http://{gateway.host}:{gateway.port}"
        self._gateway_port = gateway.port
        self._launcher = self._launcher_for(self.network.mode == "public", gateway.port)
        return f"http://127.0.0.1:{gateway.port}"

    async def close_gateway(self) -> None:
        self._gateway_port = None
        self._launcher = self._launcher_for(self.network.mode == "public", None)

    async def _place(self, path: str, layers: Sequence[Path] | None) -> None:
        host = self._host_path(path)
        if layers is None:
            # Whatever the agent left at /logs/verifier is hidden under a directory it never had.
            files.remove_tree(host)
            host.mkdir()
            if self.host_uid is not None:
                os.chown(host, self.host_uid, self.host_uid)
            if self.mode == "bwrap":
                if path == self.visible.verifier_logs:
                    files.empty_directory(self.paths.logs / "verifier")
                # The verifier's own /tmp is laid over the agent's, which it never sees.
                seen_at = self.visible.tmp if path == _FRESH_TMP else path
                self._binds[path] = ["--bind", str(host), seen_at]
            return
        if not (path == self.visible.tests and self._unseen_tests):
            files.fresh_layers([layer for layer in layers if layer.is_dir()], host)
        self._unseen_tests = False
        if self.mode == "bwrap":
            self._binds[path] = ["--ro-bind", str(host), path]

    async def _clear(self, path: str) -> None:
        self._binds.pop(path, None)
        files.remove_tree(self._host_path(path))

    async def _write(self, path: str, data: bytes) -> None:
        with open_capture(self.paths.root, self._host_path(path)) as handle:
            handle.write(data)

    async def _read(self, path: str, max_bytes: int) -> bytes | None:
        return read_inside(self.paths.root, self._host_path(path), max_bytes)

    async def _kind(self, path: str) -> PathKind | None:
        try:
            mode = self._host_path(path).lstat().st_mode
        except (EnvironmentSetupError, OSError):
            return None  # nothing a command could write lies outside the instance's directories
        if stat.S_ISDIR(mode):
            return "directory"
        return "file" if stat.S_ISREG(mode) else "other"

    async def _copy_in(self, source: Path, path: str) -> None:
        target = self._host_path(path)
        files.remove_tree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True, copy_function=shutil.copy)
        else:
            shutil.copy(source, target)

    async def _copy_out(self, path: str, target: Path, budget: KeepBudget) -> list[str]:
        """Only once the instance is stopped (nothing can plant a link or grow a file any more): a
        small plain tree is moved at once (one rename) or, from the quota's own file system, which
        no rename leaves, copied at once; anything else is copied on a thread so the event loop
        keeps serving other trials."""
        source = self._host_path(path)
        try:
            if not stat.S_ISDIR(source.lstat().st_mode):
                return ["not a directory: nothing was copied"]
        except FileNotFoundError:
            return []
        if not self._stopped:
            # A running command could swap a directory for a link between the walk and the open.
            raise EnvironmentSetupError("the local environment copies files out only after stop()")
        if not self._quota_mounted and move_plain_tree(source, target, (), INLINE_ENTRIES, budget):
            return []
        if small_plain_tree(source):
            return copy_tree_masked(source, target, (), budget).notes
        kept = await asyncio.to_thread(copy_tree_masked, source, target, (), budget)
        return kept.notes

    async def snapshot(self, previous: Snapshot | None = None) -> Snapshot:
        """Small working directories are read in place: handing the walk to a thread costs more than
        the walk (about a millisecond per hop on a busy 2-core worker); large ones go to a thread so
        the event loop keeps serving the other trials."""
        if len(previous or {}) < INLINE_SNAPSHOT_FILES:
            return snapshot(self.paths.app, previous)
        return await asyncio.to_thread(snapshot, self.paths.app, previous)

    async def _wait(self, proc: spawn.HostProcess, timeout: float | None) -> bool:
        """Wait for the command; on timeout or cancellation kill its whole tree first."""
        self._running.add(proc.pid)
        try:
            async with asyncio.timeout(timeout):
                await proc.wait()
        except TimeoutError:
            self._processes.kill_tree(proc.pid)
            await proc.wait()
            await self._processes.kill_all()
            return True
        except BaseException:
            self._processes.kill_tree(proc.pid)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(proc.wait())
            raise
        finally:
            self._running.discard(proc.pid)
        return False

    def instance_pids(self) -> list[int]:
        """The run's live processes (stragglers.py says how they are found)."""
        return self._processes.pids()

    async def stop(self) -> None:
        """Kill whatever the run still has (a daemon an agent left behind) before the verifier
        starts and before logs are collected; problems go to `warnings`."""
        for pid in list(self._running):
            kill_group(pid)
        self.warnings.extend(await self._processes.kill_all())
        self._close_pumps()
        self._stopped = True

    def resource_problem(self) -> str | None:
        problems = []
        kills = self._cgroups.oom_kills()
        if kills > self._oom_seen:
            self._oom_seen = kills
            problems.append(f"out of memory: a process was killed at the {self.limits.memory_mb} MB limit")
        if self._quota_mounted and quota.is_full(self.paths.root):
            problems.append(f"disk quota full: the instance's {self.limits.disk_mb} MB were used up")
        return "; ".join(problems) or None

    async def close(self) -> list[str]:
        """Kill every process of the run and delete the instance; returns problems, if any."""
        for pid in list(self._running):
            kill_group(pid)
        problems = [] if self._stopped else await self._processes.kill_all()
        self._close_pumps()
        problems += [f"cgroup {d} could not be removed" for d in self._cgroups.remove()]
        # A file system that holds little is unmounted here (on_loop.py); freeing much, or removing
        # a tree file by file, is done on a thread.
        if self._quota_mounted and frees_little(self.paths.root):
            self._remove_files()
        else:
            await asyncio.to_thread(self._remove_files)
        if self.host_uid is not None and not problems:
            HOST_UIDS.give_back(self.host_uid)  # a uid with survivors is never handed out again
        return problems

    def _remove_files(self) -> None:
        if self._quota_mounted and quota.unmount_quota(self.paths.root):
            with contextlib.suppress(OSError):
                self.paths.root.rmdir()
        else:
            files.remove_tree(self.paths.root)


def _exit_code(returncode: int | None) -> int | None:
    """Shell convention: death by signal N is reported as 128 + N."""
    if returncode is None:
        return None
    return 128 - returncode if returncode < 0 else returncode
