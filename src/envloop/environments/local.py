"""The `local` environment: a bubblewrap sandbox per command when bwrap works, else a plain process group.

One instance lives for one trial. Each `exec` is exactly one `asyncio.create_subprocess_exec`: bwrap
(or the command itself) is forked straight into the instance's cgroups with its rlimits already
set, so nothing on the hot path polls, sleeps or probes. Teardown always runs, also on
cancellation, and kills everything the trial started before deleting its directory.
"""

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Literal, TypeVar

from envloop.core.trial import SandboxMode, TrialSpec
from envloop.environments import instance as files
from envloop.environments.base import (
    NO_MOUNTS,
    Environment,
    EnvironmentSetupError,
    ExecResult,
    InstancePaths,
    Mounts,
    VisiblePaths,
)
from envloop.environments.bwrap import base_args, bwrap_executable
from envloop.environments.limits import InstanceCgroups, Limits, launch_prefix, rlimits_for
from envloop.environments.procs import (
    MARKER_VARIABLE,
    kill_group,
    kill_pids,
    marked_pids,
    read_tail,
    wait_gone,
)
from envloop.tasks.model import HarborTask
from envloop.tasks.variables import resolve_env

STANDARD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_TEARDOWN_KILL_SEC = 10.0
_INLINE_REMOVAL_ENTRIES = 64
_T = TypeVar("_T")


class LocalEnvironment:
    """One trial's instance. Build it through `LocalEnvironmentProvider.instance`."""

    def __init__(
        self,
        *,
        mode: SandboxMode,
        note: str,
        paths: InstancePaths,
        visible: VisiblePaths,
        warnings: list[str],
        base_env: dict[str, str],
        cgroups: InstanceCgroups,
        rlimits: list[tuple[str, int]],
        sandbox_args: list[str],
        task: HarborTask,
        trial_id: str,
    ) -> None:
        self.mode: SandboxMode = mode
        self.note: str | None = note
        self.paths = paths
        self.visible = visible
        self.warnings = warnings
        self._base_env = base_env
        self._cgroups = cgroups
        self._launch = launch_prefix(cgroups.procs_files(), rlimits)
        self._sandbox_args = sandbox_args
        self._task = task
        self._trial_id = trial_id
        self._running: set[int] = set()
        self._captures = 0
        self._stopped = False

    def to_visible(self, host_path: Path) -> str:
        pairs = [
            (self.paths.home, self.visible.home),
            (self.paths.tmp, self.visible.tmp),
            (self.paths.app, self.visible.app),
            (self.paths.logs, self.visible.logs),
            (self.paths.tests, self.visible.tests),
            (self.paths.solution, self.visible.solution),
        ]
        for host_dir, seen_as in pairs:
            if host_path.is_relative_to(host_dir):
                relative = host_path.relative_to(host_dir).as_posix()
                return seen_as if relative == "." else f"{seen_as.rstrip('/')}/{relative}"
        raise ValueError(f"{host_path} is not visible inside the environment")

    def _argv(self, command: Sequence[str], mounts: Mounts) -> list[str]:
        if self.mode == "plain":
            return [*self._launch, *command]
        # Read-only binds of the frozen task need no private copy: nothing inside can change them.
        extra: list[str] = []
        if "tests" in mounts:
            extra += ["--ro-bind", str(_existing(self._task.tests_dir, self.paths.tests)), self.visible.tests]
        if "solution" in mounts:
            source = _existing(self._task.solution_dir, self.paths.solution)
            extra += ["--ro-bind", str(source), self.visible.solution]
        return [*self._launch, *self._sandbox_args, *extra, "--", *command]

    def _capture_path(self, given: Path | None, stream: str) -> tuple[Path, bool]:
        if given is not None:
            given.parent.mkdir(parents=True, exist_ok=True)
            return given, False
        self._captures += 1
        capture = self.paths.root / ".capture"
        capture.mkdir(exist_ok=True)
        return capture / f"{self._captures}.{stream}", True

    async def exec(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdout_path: Path | None = None,
        stderr_path: Path | None = None,
        mounts: Mounts = NO_MOUNTS,
    ) -> ExecResult:
        if self.mode == "plain" and "tests" in mounts:
            files.materialize(self._task.tests_dir, self.paths.tests)
        if self.mode == "plain" and "solution" in mounts:
            files.materialize(self._task.solution_dir, self.paths.solution)
        # The marker goes last so no caller can hide a process from teardown.
        self._stopped = False
        full_env = {**self._base_env, **(env or {}), MARKER_VARIABLE: self._trial_id}
        out_path, out_temp = self._capture_path(stdout_path, "stdout")
        err_path, err_temp = self._capture_path(stderr_path, "stderr")
        started = time.monotonic()
        # The captures stay open so their tails are read back without opening the files again.
        with out_path.open("w+b", buffering=0) as out, err_path.open("w+b", buffering=0) as err:
            proc = await asyncio.create_subprocess_exec(
                *self._argv(command, mounts),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=full_env,
                cwd=self.paths.app,
                start_new_session=True,
            )
            timed_out = await self._wait(proc, timeout)
            (stdout, stdout_whole), (stderr, stderr_whole) = read_tail(out), read_tail(err)
        for path, temporary in ((out_path, out_temp), (err_path, err_temp)):
            if temporary:
                path.unlink(missing_ok=True)
        return ExecResult(
            exit_code=None if timed_out else _exit_code(proc.returncode),
            stdout=stdout,
            stderr=stderr,
            timed_out=timed_out,
            duration_sec=time.monotonic() - started,
            stdout_whole=stdout_whole,
            stderr_whole=stderr_whole,
        )

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

    def _kill_tree(self, pgid: int) -> None:
        kill_group(pgid)
        if self._cgroups.tracks_processes:
            self._cgroups.kill_all()
        elif self.mode == "plain":
            kill_pids(marked_pids(self._trial_id))

    async def _kill_stragglers(self) -> list[str]:
        """Kill whatever the trial still runs and wait until it is gone; returns survivors."""
        if self._cgroups.tracks_processes:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + _TEARDOWN_KILL_SEC
            while self._cgroups.kill_all():
                if loop.time() > deadline:
                    return [f"processes {self._cgroups.pids()} survived teardown"]
                await asyncio.sleep(0.005)
            return []
        stragglers = marked_pids(self._trial_id)
        kill_pids(stragglers)
        left = await wait_gone(stragglers, timeout=_TEARDOWN_KILL_SEC)
        return [f"process {pid} survived teardown" for pid in left]

    async def stop(self) -> None:
        """Kill whatever the trial still runs (a daemon an agent left behind), before its logs are
        collected; problems go to `warnings`."""
        for pid in list(self._running):
            kill_group(pid)
        self.warnings.extend(await self._kill_stragglers())
        self._stopped = True

    async def close(self) -> list[str]:
        """Kill every process of the trial and delete the instance; returns problems, if any."""
        for pid in list(self._running):
            kill_group(pid)
        problems = [] if self._stopped else await self._kill_stragglers()
        problems += [f"cgroup {d} could not be removed" for d in self._cgroups.remove()]
        # A small instance goes at once; a thread hop would cost more than the removal.
        if not files.remove_small_tree(self.paths.root, _INLINE_REMOVAL_ENTRIES):
            await asyncio.to_thread(files.remove_tree, self.paths.root)
        return problems


def _existing(directory: Path, empty_fallback: Path) -> Path:
    """`directory` if the task has it, else an empty instance directory to bind in its place."""
    if directory.is_dir():
        return directory
    empty_fallback.mkdir(exist_ok=True)
    return empty_fallback


def _exit_code(returncode: int | None) -> int | None:
    """Shell convention: death by signal N is reported as 128 + N."""
    if returncode is None:
        return None
    return 128 - returncode if returncode < 0 else returncode


async def _finish_even_if_cancelled(work: Awaitable[_T]) -> _T:
    """Run cleanup to the end even when the caller is cancelled meanwhile, then re-raise the cancel."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return task.result()


SandboxPreference = Literal["auto", "bwrap", "plain"]
SANDBOX_VARIABLE = "ENVLOOP_SANDBOX"


def sandbox_preference() -> SandboxPreference:
    """The operator's choice from ENVLOOP_SANDBOX (auto | bwrap | plain), read per instance."""
    value = os.environ.get(SANDBOX_VARIABLE, "auto") or "auto"
    if value not in ("auto", "bwrap", "plain"):
        raise EnvironmentSetupError(f"{SANDBOX_VARIABLE}={value!r}: expected auto, bwrap or plain")
    return value  # type: ignore[return-value]


class LocalEnvironmentProvider:
    """Instances on this host. `prefer="auto"` uses bwrap when a real launch works, else plain.

    Without an explicit `prefer`, ENVLOOP_SANDBOX decides (default auto).
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

    def _mode(self) -> tuple[SandboxMode, str | None, str]:
        """(mode, bwrap path, why plain) for the next instance."""
        prefer = self.prefer or sandbox_preference()
        if prefer == "plain":
            return "plain", None, "plain mode requested"
        executable, reason = bwrap_executable()
        if executable is not None:
            return "bwrap", executable, ""
        if prefer == "bwrap":
            raise EnvironmentSetupError(f"bwrap mode requested but unavailable: {reason}")
        return "plain", None, reason

    def instance(self, task: HarborTask, spec: TrialSpec) -> AbstractAsyncContextManager[Environment]:
        return self._instance(task, spec)

    @contextlib.asynccontextmanager
    async def _instance(self, task: HarborTask, spec: TrialSpec) -> AsyncIterator[Environment]:
        environment = self._create(task, spec)
        try:
            yield environment
        finally:
            problems = await _finish_even_if_cancelled(environment.close())
            environment.warnings.extend(problems)

    def _create(self, task: HarborTask, spec: TrialSpec) -> LocalEnvironment:
        mode, executable, why_plain = self._mode()
        plan = files.read_plan(task)
        workdir = files.resolve_workdir(task, plan)
        paths = files.instance_paths(spec.instance_root / spec.trial_id)
        section = task.config.environment
        limits = self.limits.model_copy(
            update={
                "memory_mb": section.memory_mb or self.limits.memory_mb,
                "storage_mb": section.storage_mb or self.limits.storage_mb,
                "cpus": section.cpus or self.limits.cpus,
            }
        )
        network = spec.network or section.allow_internet
        cgroups = InstanceCgroups(spec.trial_id, limits, enabled=self.use_cgroups)
        try:
            files.create_instance(paths, plan, workdir)
        except BaseException:
            cgroups.remove()
            files.remove_tree(paths.root)
            raise
        rlimits = rlimits_for(limits, memory_in_cgroup=cgroups.has_memory)
        if executable is not None:
            visible = VisiblePaths(
                app=workdir, logs="/logs", tests="/tests", solution="/solution", tmp="/tmp", home="/tmp/home"
            )
            sandbox_args = [
                *base_args(executable, network=network),
                *("--bind", str(paths.tmp), "/tmp"),
                *("--bind", str(paths.app), workdir),
                *("--bind", str(paths.logs), "/logs"),
                *("--chdir", workdir),
            ]
            note = "bwrap sandbox" + ("" if network else ", loopback-only network")
        else:
            visible = VisiblePaths(**{k: str(v) for k, v in paths.model_dump().items() if k != "root"})
            sandbox_args = []
            note = f"plain process group: weaker isolation, network not restricted ({why_plain})"
        enforced = cgroups.enforced + [f"{name}={value}" for name, value in rlimits]
        note += "; limits: " + ", ".join(enforced)
        env = {"PATH": STANDARD_PATH, "LANG": "C.UTF-8", **plan.env, **resolve_env(section.env, spec.params)}
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
            mode=mode,
            note=note,
            paths=paths,
            visible=visible,
            warnings=[warning] if warning else [],
            base_env=env,
            cgroups=cgroups,
            rlimits=rlimits,
            sandbox_args=sandbox_args,
            task=task,
            trial_id=spec.trial_id,
        )
