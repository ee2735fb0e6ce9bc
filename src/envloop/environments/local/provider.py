"""The `local` environment's provider: instances on this host, in a bubblewrap sandbox per command,
or (only when the operator asks for it with ENVLOOP_SANDBOX=plain) a plain process group.

One instance (environment.py) lives for one run of a trial. It is made on the event loop when it
copies little in, else on a thread (on_loop.py), and torn down on every way out, also on
cancellation, killing everything the run started before deleting its files.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from functools import cache
from typing import Literal

from envloop.core.trial import TrialSpec
from envloop.environments.base import EnvironmentSetupError, VisiblePaths, trial_settings
from envloop.environments.contract import Environment
from envloop.environments.local import instance as files
from envloop.environments.local import quota
from envloop.environments.local.bwrap import bwrap_executable, pasta_executable, pasta_prefix, sandbox_args
from envloop.environments.local.cgroup2 import UnifiedCgroup, instance_cgroups
from envloop.environments.local.environment import LauncherFor, LocalEnvironment
from envloop.environments.local.identity import DEFAULT_AGENT_UID, HOST_UIDS, can_switch_user, sandbox_uid
from envloop.environments.local.instance import InstancePaths
from envloop.environments.local.launch import Launcher
from envloop.environments.local.limits import InstanceCgroups, Limits, rlimits_for
from envloop.environments.local.on_loop import copies_little
from envloop.environments.local.public_egress import ensure_public_guard
from envloop.environments.policy import EffectiveLimits, operator_policy, resolve_limits
from envloop.environments.provider import EnvironmentProvider, ProviderEntry
from envloop.environments.shielded import finish_even_if_cancelled
from envloop.settings import env_name
from envloop.tasks.dockerfile import IMAGE_PATH, read_plan
from envloop.tasks.model import HarborTask
from envloop.tasks.phases import NO_NETWORK, phase_networks, task_networks

__all__ = ["DEFAULT_AGENT_UID", "LocalEnvironment", "LocalEnvironmentProvider", "sandbox_uid"]


async def _close_once_made(creation: "asyncio.Future[LocalEnvironment]") -> None:
    try:
        environment = await creation
    except Exception:  # nothing was made, or what was made is gone already
        return
    await environment.close()


SandboxPreference = Literal["auto", "bwrap", "plain"]
SANDBOX_VARIABLE = env_name("sandbox")
PLAIN_WARNING = (
    "plain mode (ENVLOOP_SANDBOX=plain): no sandbox; the trial's commands ran on the host with its "
    "network and could read whatever the host lets any user read"
)


def sandbox_preference() -> SandboxPreference:
    """The operator's choice from ENVLOOP_SANDBOX (auto | bwrap | plain), read per instance."""
    return trial_settings().sandbox


class LocalEnvironmentProvider:
    """Instances on this host, in a bubblewrap sandbox. Without bwrap nothing runs, unless the
    operator explicitly chose plain mode (`prefer="plain"` or ENVLOOP_SANDBOX=plain): `auto` never
    falls back to running a trial unsandboxed.

    `limits` gives the pids and nproc limits; memory, disk, cpus, timeouts and network come from the
    task, capped by the operator's ceilings (policy.py).
    """

    honours = "local"

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
        # A task that copies little in is made here, on the event loop (on_loop.py says why).
        if copies_little([task.environment_dir, *task.tests_sources]):
            environment = self._create(task, spec)
        else:
            environment = await self._create_on_a_thread(task, spec)
        try:
            yield environment
        finally:
            problems = await finish_even_if_cancelled(environment.close())
            environment.warnings.extend(problems)

    async def _create_on_a_thread(self, task: HarborTask, spec: TrialSpec) -> LocalEnvironment:
        """`_create` on a thread, for a task with much to copy; a cancel meanwhile lets the thread
        finish and then tears down what it made."""
        creation = asyncio.ensure_future(asyncio.to_thread(self._create, task, spec))
        try:
            return await asyncio.shield(creation)
        except asyncio.CancelledError:
            await finish_even_if_cancelled(_close_once_made(creation))
            raise

    def _create(self, task: HarborTask, spec: TrialSpec) -> LocalEnvironment:
        executable = self._bwrap()
        limits, warnings = resolve_limits(
            task,
            operator_policy(),
            agent_timeout_sec=spec.agent_timeout_sec,
            verifier_timeout_sec=spec.verifier_timeout_sec,
        )
        agent_uid = sandbox_uid(task.config.agent.user, DEFAULT_AGENT_UID, "[agent] user")
        try:
            plan = read_plan(task)
        except OSError as exc:
            raise EnvironmentSetupError(f"environment/Dockerfile cannot be read: {exc}") from exc
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
            files.make_root(paths.root, private_parent=host_uid is not None)
            if quota.can_mount():
                quota.mount_quota(paths.root, limits.disk_mb)
                quota_mounted = True
            files.create_instance(paths, plan, workdir, host_uid)
            if executable is not None and not task.steps:
                # Copied now, off the event loop; bound only into the verifier's command.
                files.fresh_layers(task.tests_sources, paths.tests)
            launcher_for = self._launchers(executable, cgroups, cgroup_limits, host_uid, spec, paths, workdir)
            network = phase_networks(task.config).baseline if limits.network else NO_NETWORK
            # A network the host cannot give fails setup, whichever phase would have asked for it.
            opened = spec.network or any(
                policy.mode == "public"
                for phases in task_networks(task.config)
                for policy in phases.policies()
            )
            launcher_for(limits.network and opened, None)
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
                **{
                    k: str(v)
                    for k, v in paths.model_dump().items()
                    if k not in ("root", "verifier_logs", "verifier_home", "verifier_tmp")
                }
            )
        note = _note(
            executable is not None, limits, cgroups, quota_mounted, host_uid, warnings, cgroup_limits
        )
        warning = plan.warning()
        return LocalEnvironment(
            mode="bwrap" if executable is not None else "plain",
            task=task,
            spec=spec,
            note=note,
            paths=paths,
            visible=visible,
            warnings=[*warnings, *([warning] if warning else [])],
            limits=limits,
            defaults={"PATH": IMAGE_PATH, "LANG": "C.UTF-8", **plan.env, "HOME": visible.home},
            network=network,
            cgroups=cgroups,
            launcher_for=launcher_for,
            agent_uid=agent_uid,
            host_uid=host_uid,
            quota_mounted=quota_mounted,
        )

    @staticmethod
    def _launchers(
        executable: str | None,
        cgroups: InstanceCgroups | UnifiedCgroup,
        cgroup_limits: Limits,
        host_uid: int | None,
        spec: TrialSpec,
        paths: InstancePaths,
        workdir: str,
    ) -> "LauncherFor":
        """The instance's launcher for commands without or with a network of their own (pasta),
        each made once, when first wanted."""
        rlimits = rlimits_for(cgroup_limits, memory_in_cgroup=cgroups.has_memory)

        @cache
        def launcher(network: bool, gateway_port: int | None) -> Launcher:
            if executable is None:
                return Launcher(cgroups.procs_files(), rlimits, host_uid, None, [], None)
            pasta = None
            if network or gateway_port is not None:
                pasta_path, reason = pasta_executable()
                if pasta_path is None:
                    raise EnvironmentSetupError(f"the trial asks for a network, but {reason}")
                ports = () if gateway_port is None else (gateway_port,)
                if network and host_uid is not None:
                    ensure_public_guard()
                pasta = pasta_prefix(pasta_path, ports, internet=network)
            binds = [
                *sandbox_args(network=pasta is not None),
                *("--bind", str(paths.tmp), "/tmp"),
                *("--bind", str(paths.app), workdir),
                *("--bind", str(paths.logs), "/logs"),
            ]
            return Launcher(cgroups.procs_files(), rlimits, host_uid, executable, binds, pasta)

        return launcher


def _note(
    sandboxed: bool,
    limits: EffectiveLimits,
    cgroups: InstanceCgroups | UnifiedCgroup,
    quota_mounted: bool,
    host_uid: int | None,
    warnings: list[str],
    cgroup_limits: Limits,
) -> str:
    """The instance's sandbox note (what isolates it, which limit is enforced how), adding a warning
    for each promise this host cannot keep."""
    if sandboxed:
        note = "bwrap sandbox, loopback only unless a phase opens a network of its own (pasta)"
    else:
        note = "plain process group: no isolation, host network"
        warnings.append(PLAIN_WARNING)
    rlimits = rlimits_for(cgroup_limits, memory_in_cgroup=cgroups.has_memory)
    enforced = cgroups.enforced + [f"{name}={value}" for name, value in rlimits]
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


def _local_provider(spec: TrialSpec) -> EnvironmentProvider:
    return LocalEnvironmentProvider()


async def _sweep_leftovers() -> list[str]:
    return await asyncio.to_thread(_leftovers_removed)


def _leftovers_removed() -> list[str]:
    return quota.sweep_leftover_mounts() + files.sweep_empty_parents()


async def _close_shared() -> list[str]:
    """No instance of the stopping worker is left: every directory below `/run/envloop` that holds
    no instance goes, its store's among them unless another of its workers still has one there."""
    await asyncio.to_thread(files.sweep_empty_parents)
    return []


LOCAL = ProviderEntry(make=_local_provider, sweep_leftovers=_sweep_leftovers, close_shared=_close_shared)
"""The `local` provider as the catalog holds it: always ready. Its sweep unmounts the instance file
systems of this host's dead workers, whatever store they served (quota.py), and removes the
directories below `/run/envloop` that no instance is left in; their other instance directories are
settled by the next worker of their store, with their runs."""
