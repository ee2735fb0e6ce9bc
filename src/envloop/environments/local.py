"""The `local` environment: a bubblewrap sandbox per command, or (only when the operator asks for it
with ENVLOOP_SANDBOX=plain) a plain process group.

One instance lives for one run of a trial. Each `exec` is exactly one
`asyncio.create_subprocess_exec`: a launcher (see launch.py) that joins the instance's cgroups, lowers
its rlimits, drops to the instance's host uid and starts bwrap, so nothing on the hot path polls,
sleeps or probes. Teardown always runs, also on cancellation, and kills everything the run started
before deleting its files.
"""

import asyncio
import contextlib
import os
import posixpath
import pwd
import re
import shutil
import stat
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import BinaryIO, Literal

from envloop.core.trial import SandboxMode, TrialSpec
from envloop.environments import instance as files
from envloop.environments import quota
from envloop.environments.base import (
    NO_MOUNTS,
    Environment,
    EnvironmentSetupError,
    ExecResult,
    Mounts,
    VisiblePaths,
)
from envloop.environments.bwrap import bwrap_executable, pasta_executable, pasta_prefix, sandbox_args
from envloop.environments.cgroup2 import UnifiedCgroup, instance_cgroups
from envloop.environments.dockerfile import IMAGE_PATH, without_empty_entries
from envloop.environments.identity import HOST_UIDS, can_switch_user
from envloop.environments.instance import InstancePaths
from envloop.environments.launch import LAUNCH_CWD, LAUNCH_ENV, Launcher, open_capture, read_inside
from envloop.environments.limits import InstanceCgroups, Limits, rlimits_for
from envloop.environments.policy import EffectiveLimits, operator_policy, resolve_limits
from envloop.environments.procs import (
    MARKER_VARIABLE,
    kill_group,
    kill_pids,
    marked_pids,
    read_tail,
    uid_pids,
    wait_gone,
)
from envloop.environments.shielded import finish_even_if_cancelled
from envloop.tasks.model import HarborTask, TaskUser
from envloop.tasks.variables import resolve_env
from envloop.trajectories.workspace import Snapshot, snapshot

DEFAULT_AGENT_UID = 1000
"""Who the agent is inside the sandbox unless its task names a user: not root."""
_TEARDOWN_KILL_SEC = 10.0
_INLINE_COPY_ENTRIES = 64
_INLINE_COPY_BYTES = 1 << 20
INLINE_SNAPSHOT_FILES = 500
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def sandbox_uid(user: TaskUser | None, default: int, where: str) -> int:
    """The uid inside the sandbox for a task's `user` field: a number, `root`, or a name the
    sandbox's /etc/passwd knows. A user that only the task's image would create cannot be honoured
    here, and the instance refuses it rather than run as someone else."""
    if user is None:
        return default
    if isinstance(user, int) or user.isdigit():
        uid = int(user)
        if not 0 <= uid < 65534:
            raise EnvironmentSetupError(f"{where} = {user!r}: not a usable uid")
        return uid
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        raise EnvironmentSetupError(
            f"{where} = {user!r}: no such user in the local environment (users made by the task's "
            "Dockerfile exist only in its image)"
        ) from None


def _checked_env(env: Mapping[str, str]) -> dict[str, str]:
    """Variables as the trial will see them: valid names, no NUL, no empty `*PATH` entries."""
    checked: dict[str, str] = {}
    for name, value in env.items():
        if not _VARIABLE_NAME.fullmatch(name) or "\0" in value:
            raise EnvironmentSetupError(
                f"environment variable {name[:60]!r} cannot be set (bad name or value)"
            )
        checked[name] = without_empty_entries(name, value)
    return checked


class LocalEnvironment:
    """One run's instance. Build it through `LocalEnvironmentProvider.instance`."""

    def __init__(
        self,
        *,
        mode: SandboxMode,
        note: str,
        paths: InstancePaths,
        visible: VisiblePaths,
        warnings: list[str],
        limits: EffectiveLimits,
        base_env: dict[str, str],
        cgroups: InstanceCgroups | UnifiedCgroup,
        launcher: Launcher,
        task: HarborTask,
        run_id: str,
        secrets: tuple[str, ...],
        agent_uid: int,
        host_uid: int | None,
        quota_mounted: bool,
    ) -> None:
        self.mode: SandboxMode = mode
        self.note: str | None = note
        self.paths = paths
        """The instance's host directories: this provider's own business, never its callers'."""
        self.visible = visible
        self.warnings = warnings
        self.limits = limits
        self._base_env = base_env
        self._cgroups = cgroups
        self._launcher = launcher
        self._task = task
        self._run_id = run_id
        self._secrets = secrets
        self._agent_uid = agent_uid
        self.host_uid = host_uid
        """The instance's own host uid (None: the worker's user, when it cannot switch)."""
        self._quota_mounted = quota_mounted
        self._oom_seen = cgroups.oom_kills()
        self._running: set[int] = set()
        self._stopped = False

    def _host_path(self, path: str) -> Path:
        """The host file behind a path as a command names it; only the instance's own directories
        are reachable this way (an absolute path that leaves them, or climbs out with `..`, is
        refused)."""
        normal = posixpath.normpath(path)
        pairs = [
            (self.visible.verifier_logs, self.paths.verifier_logs),
            (self.visible.home, self.paths.home),
            (self.visible.tmp, self.paths.tmp),
            (self.visible.app, self.paths.app),
            (self.visible.logs, self.paths.logs),
            (self.visible.tests, self.paths.tests),
            (self.visible.solution, self.paths.solution),
        ]
        if path.startswith("/") and "\0" not in path:
            for seen_as, host_dir in pairs:
                if normal == seen_as or normal.startswith(seen_as.rstrip("/") + "/"):
                    relative = posixpath.relpath(normal, seen_as)
                    return host_dir if relative == "." else host_dir / relative
        raise EnvironmentSetupError(f"{path[:200]!r} is not a path of the instance's own directories")

    def _prepare_mounts(self, mounts: Mounts) -> list[str]:
        """Fresh copies for this command only; in a sandbox, the binds that show them."""
        try:
            return self._mount_binds(mounts)
        except (OSError, shutil.Error) as exc:
            reason = (
                "disk quota full" if self._quota_mounted and quota.is_full(self.paths.root) else "no space"
            )
            if isinstance(exc, OSError) and exc.strerror:
                reason = exc.strerror
            raise EnvironmentSetupError(f"could not prepare {', '.join(sorted(mounts))}: {reason}") from None

    def _mount_binds(self, mounts: Mounts) -> list[str]:
        binds: list[str] = []
        if "tests" in mounts:
            # In a sandbox the copy made at setup is the worker's and was never visible to the agent;
            # a plain command could have changed it, so plain mode copies again.
            # A multi-step task's tests change with its step, so they are copied again.
            if self.mode == "plain" or self._task.steps or not self.paths.tests.is_dir():
                files.fresh_layers(self._task.tests_sources, self.paths.tests)
            binds += ["--ro-bind", str(self.paths.tests), self.visible.tests]
        if "solution" in mounts:
            files.fresh_copy(self._task.solution_dir, self.paths.solution)
            binds += ["--ro-bind", str(self.paths.solution), self.visible.solution]
        if "verifier_logs" in mounts:
            # Whatever the agent left at /logs/verifier is hidden under a directory it never had.
            files.remove_tree(self.paths.verifier_logs)
            self.paths.verifier_logs.mkdir()
            if self.host_uid is not None:
                os.chown(self.paths.verifier_logs, self.host_uid, self.host_uid)
            if self.mode == "bwrap":
                files.empty_directory(self.paths.logs / "verifier")
                binds += ["--bind", str(self.paths.verifier_logs), f"{self.visible.logs}/verifier"]
        return binds

    def _step_uid(self) -> int:
        return sandbox_uid(self._task.agent_user, DEFAULT_AGENT_UID, "[steps.agent] user")

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
        self._stopped = False
        binds = self._prepare_mounts(mounts)
        # A multi-step task's steps may name their own agent user.
        default = self._agent_uid if self._task.step is None else self._step_uid()
        uid = sandbox_uid(user, default, "user")
        if self.mode == "bwrap":
            binds += ["--uid", str(uid), "--gid", str(uid)]
        full_env = _checked_env({**self._base_env, **(env or {})})
        if self.mode == "plain":
            # The marker goes last so no caller can hide a process from teardown.
            full_env[MARKER_VARIABLE] = self._run_id
        argv, args_fd = self._launcher.argv(command, full_env, cwd or self.visible.app, binds)
        started = time.monotonic()
        # The captures stay open so their tails are read back without opening the files again.
        try:
            with _capture(stdout_path) as out, _capture(stderr_path) as err:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    env=LAUNCH_ENV,
                    cwd=LAUNCH_CWD,
                    start_new_session=True,
                    pass_fds=() if args_fd is None else (args_fd,),
                )
                if args_fd is not None:
                    os.close(args_fd)
                    args_fd = None
                timed_out = await self._wait(proc, timeout)
                (stdout, stdout_whole), (stderr, stderr_whole) = read_tail(out), read_tail(err)
        finally:
            if args_fd is not None:
                os.close(args_fd)
        return ExecResult(
            exit_code=None if timed_out else _exit_code(proc.returncode),
            stdout=stdout,
            stderr=stderr,
            timed_out=timed_out,
            duration_sec=time.monotonic() - started,
            stdout_whole=stdout_whole,
            stderr_whole=stderr_whole,
        )

    async def write_file(self, path: str, data: bytes) -> None:
        target = self._host_path(path)
        with open_capture(self.paths.root, target) as handle:
            handle.write(data)

    async def read_file(self, path: str, max_bytes: int) -> bytes | None:
        return read_inside(self.paths.root, self._host_path(path), max_bytes)

    async def get_dir(self, path: str, target: Path) -> list[str]:
        """Only once the instance is stopped (nothing can plant a link or grow a file any more): a
        small plain tree is moved at once (one rename), or copied in place when `target` already
        holds files; anything else is kept on a thread so the event loop keeps serving other trials."""
        from envloop.runners.artifacts import (  # noqa: PLC0415 (runners import this module)
            copy_tree_masked,
            move_plain_tree,
        )

        source = self._host_path(path)
        try:
            if not stat.S_ISDIR(source.lstat().st_mode):
                return [f"{path} is not a directory: nothing was copied"]
        except FileNotFoundError:
            return []
        if not self._stopped:
            # A running command could swap a directory for a link between the walk and the open.
            raise EnvironmentSetupError("the local environment copies files out only after stop()")
        if not target.exists() and move_plain_tree(source, target, self._secrets, _INLINE_COPY_ENTRIES):
            return []
        if files.small_plain_tree(source, _INLINE_COPY_ENTRIES, _INLINE_COPY_BYTES):
            return copy_tree_masked(source, target, self._secrets).notes
        return await asyncio.to_thread(_keep, source, target, self._secrets)

    async def snapshot(self, previous: Snapshot | None = None) -> Snapshot:
        """Small working directories are read in place: handing the walk to a thread costs more than
        the walk (about a millisecond per hop on a busy 2-core worker); large ones go to a thread so
        the event loop keeps serving the other trials."""
        if len(previous or {}) < INLINE_SNAPSHOT_FILES:
            return snapshot(self.paths.app, previous)
        return await asyncio.to_thread(snapshot, self.paths.app, previous)

    async def _wait(self, proc: asyncio.subprocess.Process, timeout: float | None) -> bool:
        """Wait for the command; on timeout or cancellation kill its whole tree first."""
        self._running.add(proc.pid)
        try:
            async with asyncio.timeout(timeout):
                await proc.wait()
        except TimeoutError:
            self._kill_tree(proc.pid)
            await proc.wait()
            await self._kill_stragglers()
            return True
        except BaseException:
            self._kill_tree(proc.pid)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(proc.wait())
            raise
        finally:
            self._running.discard(proc.pid)
        return False

    def instance_pids(self) -> list[int]:
        """The run's live processes: its cgroup's list, else by its own host uid, else (plain mode)
        by the marker variable. In bwrap mode without any of these, each command's pid namespace
        ended with it, and everything in it."""
        if self._cgroups.tracks_processes:
            return self._cgroups.pids()
        if self.host_uid is not None:
            return uid_pids(self.host_uid)
        return marked_pids(self._run_id) if self.mode == "plain" else []

    def _kill_tree(self, pgid: int) -> None:
        kill_group(pgid)
        if self._cgroups.tracks_processes:
            self._cgroups.kill_all()
        else:
            kill_pids(self.instance_pids())

    async def _kill_stragglers(self) -> list[str]:
        """Kill whatever the run still has and wait until it is gone; returns survivors."""
        if self._cgroups.tracks_processes:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + _TEARDOWN_KILL_SEC
            while self._cgroups.kill_all():
                if loop.time() > deadline:
                    return [f"processes {self._cgroups.pids()} survived teardown"]
                await asyncio.sleep(0.005)
            return []
        # A scan by uid or marker misses a process caught in the middle of an exec (its environment
        # is unreadable for that moment): only two empty scans in a row mean nothing is left.
        deadline = asyncio.get_running_loop().time() + _TEARDOWN_KILL_SEC
        empty_scans = 0
        while empty_scans < 2:
            stragglers = self.instance_pids()
            if not stragglers:
                empty_scans += 1
                continue
            if asyncio.get_running_loop().time() > deadline:
                return [f"process {pid} survived teardown" for pid in stragglers]
            empty_scans = 0
            kill_pids(stragglers)
            left = await wait_gone(stragglers, timeout=_TEARDOWN_KILL_SEC)
            if left:
                return [f"process {pid} survived teardown" for pid in left]
        return []

    async def stop(self) -> None:
        """Kill whatever the run still has (a daemon an agent left behind) before the verifier
        starts and before logs are collected; problems go to `warnings`."""
        for pid in list(self._running):
            kill_group(pid)
        self.warnings.extend(await self._kill_stragglers())
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
        problems = [] if self._stopped else await self._kill_stragglers()
        problems += [f"cgroup {d} could not be removed" for d in self._cgroups.remove()]
        # Unmounting takes milliseconds of kernel time on a busy host: not on the event loop.
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


def _capture(path: Path | None) -> BinaryIO:
    """A capture file of the worker's (never inside the instance), or a nameless temporary one."""
    if path is None:
        return tempfile.TemporaryFile()
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("w+b", buffering=0)


async def _close_once_made(creation: "asyncio.Future[LocalEnvironment]") -> None:
    try:
        environment = await creation
    except Exception:  # nothing was made, or what was made is gone already
        return
    await environment.close()


def _keep(source: Path, target: Path, secrets: tuple[str, ...]) -> list[str]:
    from envloop.runners.artifacts import keep_tree  # noqa: PLC0415 (runners import this module)

    return keep_tree(source, target, secrets)


def _exit_code(returncode: int | None) -> int | None:
    """Shell convention: death by signal N is reported as 128 + N."""
    if returncode is None:
        return None
    return 128 - returncode if returncode < 0 else returncode


SandboxPreference = Literal["auto", "bwrap", "plain"]
SANDBOX_VARIABLE = "ENVLOOP_SANDBOX"
PLAIN_WARNING = (
    "plain mode (ENVLOOP_SANDBOX=plain): no sandbox; the trial's commands ran on the host with its "
    "network and could read whatever the host lets any user read"
)


def sandbox_preference() -> SandboxPreference:
    """The operator's choice from ENVLOOP_SANDBOX (auto | bwrap | plain), read per instance."""
    value = os.environ.get(SANDBOX_VARIABLE, "auto") or "auto"
    if value not in ("auto", "bwrap", "plain"):
        raise EnvironmentSetupError(f"{SANDBOX_VARIABLE}={value!r}: expected auto, bwrap or plain")
    return value  # type: ignore[return-value]


class LocalEnvironmentProvider:
    """Instances on this host, in a bubblewrap sandbox. Without bwrap nothing runs, unless the
    operator explicitly chose plain mode (`prefer="plain"` or ENVLOOP_SANDBOX=plain): `auto` never
    falls back to running a trial unsandboxed.

    `limits` gives the pids and nproc limits; memory, disk, cpus, timeouts and network come from the
    task, capped by the operator's ceilings (policy.py).
    """

    def __init__(
        self,
        prefer: SandboxPreference | None = None,
        limits: Limits | None = None,
        *,
        cgroups: bool = True,
    ) -> None:
        self.prefer = prefer
        self.limits = limits or Limits()
        self.use_cgroups = cgroups

    def _bwrap(self) -> str | None:
        """bwrap's path for the next instance, or None for an explicitly chosen plain mode."""
        if (self.prefer or sandbox_preference()) == "plain":
            return None
        executable, reason = bwrap_executable()
        if executable is None:
            raise EnvironmentSetupError(
                f"no sandbox: {reason}; install bubblewrap, or set {SANDBOX_VARIABLE}=plain to run "
                "trials without isolation"
            )
        return executable

    def instance(self, task: HarborTask, spec: TrialSpec) -> AbstractAsyncContextManager[Environment]:
        return self._instance(task, spec)

    @contextlib.asynccontextmanager
    async def _instance(self, task: HarborTask, spec: TrialSpec) -> AsyncIterator[Environment]:
        # Made on a thread (mounts, cgroups and directories cost milliseconds of kernel time on a
        # busy host); a cancel meanwhile lets the thread finish and then tears down what it made.
        creation = asyncio.ensure_future(asyncio.to_thread(self._create, task, spec))
        try:
            environment = await asyncio.shield(creation)
        except asyncio.CancelledError:
            await finish_even_if_cancelled(_close_once_made(creation))
            raise
        try:
            yield environment
        finally:
            problems = await finish_even_if_cancelled(environment.close())
            environment.warnings.extend(problems)

    def _create(self, task: HarborTask, spec: TrialSpec) -> LocalEnvironment:
        executable = self._bwrap()
        limits, warnings = resolve_limits(
            task,
            operator_policy(),
            agent_timeout_sec=spec.agent_timeout_sec,
            verifier_timeout_sec=spec.verifier_timeout_sec,
            network_requested=spec.network,
        )
        agent_uid = sandbox_uid(task.config.agent.user, DEFAULT_AGENT_UID, "[agent] user")
        plan = files.read_plan(task)
        workdir = files.resolve_workdir(task, plan)
        # Plain mode has no sandbox to hand a uid to: its commands name host paths, which a uid of
        # their own could not reach below the worker's private directories.
        host_uid = HOST_UIDS.take() if can_switch_user() and executable is not None else None
        parent = files.instance_parent(spec.instance_root, for_other_uid=host_uid is not None)
        paths = files.instance_paths(parent / spec.run_id)
        cgroup_limits = self.limits.model_copy(
            update={"memory_mb": limits.memory_mb, "storage_mb": limits.disk_mb, "cpus": limits.cpus}
        )
        cgroups = instance_cgroups(spec.run_id, cgroup_limits, enabled=self.use_cgroups)
        quota_mounted = False
        try:
            if paths.root.exists():  # left by a run whose worker died; this run starts afresh
                files.remove_instance(paths.root)
            paths.root.mkdir(parents=True)
            if quota.can_mount():
                quota.mount_quota(paths.root, limits.disk_mb)
                quota_mounted = True
            files.create_instance(paths, plan, workdir, host_uid)
            if executable is not None:
                files.fresh_layers(task.tests_sources, paths.tests)
            launcher = self._launcher(
                executable, limits, cgroups, cgroup_limits, host_uid, spec, paths, workdir
            )
        except BaseException:
            cgroups.remove()
            if quota_mounted:
                quota.unmount_quota(paths.root)
            files.remove_tree(paths.root)
            if host_uid is not None:
                HOST_UIDS.give_back(host_uid)
            raise
        if executable is not None:
            visible = VisiblePaths(
                app=workdir, logs="/logs", tests="/tests", solution="/solution", tmp="/tmp", home="/tmp/home"
            )
        else:
            # Plain commands name host paths: the verifier writes where $ENVLOOP_LOGS_DIR says.
            paths = paths.model_copy(update={"verifier_logs": paths.logs / "verifier"})
            visible = VisiblePaths(
                **{k: str(v) for k, v in paths.model_dump().items() if k not in ("root", "verifier_logs")}
            )
        note = _note(executable is not None, limits, cgroups, launcher, quota_mounted, host_uid, warnings)
        env = {
            "PATH": IMAGE_PATH,
            "LANG": "C.UTF-8",
            **plan.env,
            **resolve_env(task.config.environment.env, spec.params),
        }
        env |= {
            "HOME": visible.home,
            "ENVLOOP_JOB_ID": spec.job_id,
            "ENVLOOP_TRIAL_ID": spec.trial_id,
            "ENVLOOP_TASK": spec.task_name,
            "ENVLOOP_ATTEMPT": str(spec.attempt),
            "ENVLOOP_APP_DIR": visible.app,
            "ENVLOOP_LOGS_DIR": visible.logs,
            "ENVLOOP_TESTS_DIR": visible.tests,
            "ENVLOOP_SOLUTION_DIR": visible.solution,
        }
        warning = plan.warning()
        return LocalEnvironment(
            mode="bwrap" if executable is not None else "plain",
            note=note,
            paths=paths,
            visible=visible,
            warnings=[*warnings, *([warning] if warning else [])],
            limits=limits,
            base_env=_checked_env(env),
            cgroups=cgroups,
            launcher=launcher,
            task=task,
            run_id=spec.run_id,
            secrets=spec.secret_values,
            agent_uid=agent_uid,
            host_uid=host_uid,
            quota_mounted=quota_mounted,
        )

    @staticmethod
    def _launcher(
        executable: str | None,
        limits: EffectiveLimits,
        cgroups: InstanceCgroups | UnifiedCgroup,
        cgroup_limits: Limits,
        host_uid: int | None,
        spec: TrialSpec,
        paths: InstancePaths,
        workdir: str,
    ) -> Launcher:
        rlimits = rlimits_for(cgroup_limits, memory_in_cgroup=cgroups.has_memory)
        if executable is None:
            return Launcher(cgroups.procs_files(), rlimits, host_uid, None, [], None)
        pasta = None
        if limits.network:
            pasta_path, reason = pasta_executable()
            if pasta_path is None:
                raise EnvironmentSetupError(f"the trial asks for a network, but {reason}")
            pasta = pasta_prefix(pasta_path, spec.forward_ports)
        binds = [
            *sandbox_args(network=limits.network),
            *("--bind", str(paths.tmp), "/tmp"),
            *("--bind", str(paths.app), workdir),
            *("--bind", str(paths.logs), "/logs"),
        ]
        return Launcher(cgroups.procs_files(), rlimits, host_uid, executable, binds, pasta)


def _note(
    sandboxed: bool,
    limits: EffectiveLimits,
    cgroups: InstanceCgroups | UnifiedCgroup,
    launcher: Launcher,
    quota_mounted: bool,
    host_uid: int | None,
    warnings: list[str],
) -> str:
    """The instance's sandbox note (what isolates it, which limit is enforced how), adding a warning
    for each promise this host cannot keep."""
    if sandboxed:
        note = "bwrap sandbox, " + ("own network (pasta)" if limits.network else "loopback-only network")
    else:
        note = "plain process group: no isolation, host network"
        warnings.append(PLAIN_WARNING)
    enforced = cgroups.enforced + [f"{name}={value}" for name, value in launcher.rlimits]
    enforced.append(
        f"disk quota {limits.disk_mb} MB (tmpfs)" if quota_mounted else "disk: largest file only (no quota)"
    )
    if host_uid is None:
        enforced.append("runs as the worker's own user")
    if not cgroups.has_memory:
        warnings.append(
            f"memory limit not enforced by a cgroup here (address space only): {limits.memory_mb} MB"
        )
    if "pids" not in cgroups.controllers:
        warnings.append("process limit not enforced by a cgroup here (RLIMIT_NPROC per uid only)")
    if limits.cpus is not None and "cpu" not in cgroups.controllers:
        warnings.append(f"cpu limit of {limits.cpus:g} not enforced here (no cpu cgroup)")
    if not quota_mounted:
        warnings.append("disk limit not enforced as a quota here (worker is not root): largest file only")
    return note + "; limits: " + ", ".join(enforced) + "; effective: " + limits.describe()
