"""The `docker` environment: each run of a trial in a container of its task's own image.

The image is built from the task's `environment/Dockerfile` once per task digest (or found in the
cache); a task whose build failed is an `environment_error` naming the build's reason. Each run
gets one container, labelled with its trial and run, removed on every way out (a crashed worker's
are swept when the next worker starts). Nothing of the host is mounted: files cross as tar streams.

- Network: `none`. A trial that is to have one (task `network_mode = "public"`, a profile's
  NETWORK=public) gets the daemon's `bridge` where it has one; a daemon without a bridge (started
  with `--bridge=none`) cannot give a trial a network of its own, and such a trial is refused:
  the host's network is never given.
- Limits: memory (no swap beyond it), cpus and pids are the container's cgroup limits, from the
  task capped by the operator's ceilings; disk is a largest-file limit only (no quota).
- Users: the agent runs as the task's `[agent] user`, else the image's USER (Harbor's rule); the
  verifier as `[verifier] user`, else root.
- Phases: the tests are copied in only for the verifier, into a `/tests` made fresh after every
  process of the agent was killed, and the solution only for the oracle; the verifier writes into a
  fresh `/logs/verifier`. Output streams to the worker's files through `docker exec`.
"""

import asyncio
import contextlib
import re
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from envloop.core.trial import SandboxMode, TrialSpec
from envloop.environments.base import (
    NO_MOUNTS,
    Environment,
    EnvironmentSetupError,
    ExecResult,
    Mounts,
    VisiblePaths,
)
from envloop.environments.docker.cli import DockerError, DockerUnavailableError, docker
from envloop.environments.docker.containers import Container, ContainerSpec
from envloop.environments.docker.images import (
    BuildConfigError,
    BuildNetwork,
    BuildRecords,
    ensure_task_image,
    read_build_settings,
)
from envloop.environments.docker.workspace import ContainerSnapshots
from envloop.environments.policy import EffectiveLimits, operator_policy, resolve_limits
from envloop.tasks.model import HarborTask, TaskUser
from envloop.tasks.variables import resolve_env
from envloop.trajectories.workspace import Snapshot

RUN_LABEL = "envloop.run"
JOB_LABEL = "envloop.job"
HOME_DIR = "/tmp/envloop-home"
DEFAULT_WORKDIR = "/app"
_SETUP_TIMEOUT_SEC = 120.0
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _checked_env(env: Mapping[str, str]) -> dict[str, str]:
    for name, value in env.items():
        if not _VARIABLE_NAME.fullmatch(name) or "\0" in value:
            raise EnvironmentSetupError(
                f"environment variable {name[:60]!r} cannot be set (bad name or value)"
            )
    return dict(env)


def _user(user: TaskUser | None) -> str | None:
    return None if user is None else str(user)


class DockerEnvironment:
    """One run's container. Build it through `DockerEnvironmentProvider.instance`."""

    mode: SandboxMode = "docker"

    def __init__(
        self,
        *,
        container: Container,
        task: HarborTask,
        note: str,
        warnings: list[str],
        limits: EffectiveLimits,
        workdir: str,
        secrets: tuple[str, ...],
    ) -> None:
        self.note: str | None = note
        self.warnings = warnings
        self.limits = limits
        self.visible = VisiblePaths(
            app=workdir, logs="/logs", tests="/tests", solution="/solution", tmp="/tmp", home=HOME_DIR
        )
        self.container = container
        self._task = task
        self._secrets = secrets
        self._snapshots = ContainerSnapshots(container, workdir)
        self._oom_seen = 0
        self._oom_pending = False

    async def _root(self, script: str, *args: str) -> None:
        """A setup step of the worker's own, as root inside."""
        result = await self.container.exec(
            ["sh", "-c", script, "envloop", *args], user="0", timeout=_SETUP_TIMEOUT_SEC
        )
        if result.exit_code != 0:
            raise EnvironmentSetupError(f"setting up the container failed: {result.stderr.strip()[-300:]}")

    async def _prepare(self, mounts: Mounts) -> None:
        """Fresh copies of the tests or solution, and an empty verifier log directory: whatever a
        command left at those paths goes first (one root exec), then the copies go in as tar streams."""
        if not mounts:
            return
        # A multi-step task's step lays its own tests over the task's, in that order.
        layers = [(source, self.visible.tests) for source in self._task.tests_sources] or [
            (self._task.tests_dir, self.visible.tests)
        ]
        copies = [
            (source, target)
            for mount, pairs in (
                ("tests", layers),
                ("solution", [(self._task.solution_dir, self.visible.solution)]),
            )
            if mount in mounts
            for source, target in pairs
        ]
        script = ['rm -rf -- "$@"']
        script += [f"mkdir -p {target}" for source, target in copies if not source.is_dir()]
        if "verifier_logs" in mounts:
            script.append(f"mkdir -p {self.visible.verifier_logs} && chmod 777 {self.visible.verifier_logs}")
        removed = [target for _, target in copies]
        if "verifier_logs" in mounts:
            removed.append(self.visible.verifier_logs)
        try:
            await self._root(" && ".join(script), *removed)
            for source, target in copies:
                if source.is_dir():
                    await self.container.put_dir(source, target, readable=True)
        except DockerError as exc:
            raise EnvironmentSetupError(f"could not prepare {', '.join(sorted(mounts))}: {exc}") from None

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
        await self._prepare(mounts)
        for path in (stdout_path, stderr_path):
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
        try:
            outcome = await self.container.exec(
                command,
                # The agent's user is the active step's `[steps.agent] user`, else the task's.
                user=_user(user) or _user(self._task.agent_user),
                cwd=cwd or self.visible.app,
                env=_checked_env(env or {}),
                timeout=timeout,
                stdout_path=stdout_path,
                stderr_path=stderr_path,
            )
        except (DockerError, ValueError) as exc:
            raise EnvironmentSetupError(f"the command could not run in the container: {exc}") from None
        finally:
            self._observe_oom()
        return ExecResult.model_validate(outcome.model_dump())

    def _observe_oom(self) -> None:
        """Note new out-of-memory kills while the container's cgroup is there to tell (it goes
        when the container stops; a restarted container counts from zero again)."""
        kills = _oom_kills(self.container.id)
        if kills > self._oom_seen:
            self._oom_pending = True
        self._oom_seen = kills

    async def write_file(self, path: str, data: bytes) -> None:
        try:
            await self.container.put_file(path, data, mode=0o644)
        except (DockerError, ValueError) as exc:
            raise EnvironmentSetupError(f"could not write {path}: {exc}") from None

    async def read_file(self, path: str, max_bytes: int) -> bytes | None:
        try:
            return await self.container.read_file(path, max_bytes=max_bytes)
        except FileNotFoundError:
            return None
        except ValueError as exc:  # longer than max_bytes
            raise OSError(str(exc)) from None
        except DockerError as exc:
            raise OSError(str(exc)) from None

    async def get_dir(self, path: str, target: Path) -> list[str]:
        from envloop.runners.artifacts import keep_tree  # noqa: PLC0415 (runners import this package)

        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".copy-out-") as scratch:
            unpacked = Path(scratch) / "tree"
            try:
                report = await self.container.get_dir(path, unpacked)
            except FileNotFoundError:
                return []
            except DockerError as exc:
                return [f"{path} could not be copied out: {exc}"]
            notes = [f"{path}: {line}" for line in report.skipped]
            notes += await asyncio.to_thread(keep_tree, unpacked, target, self._secrets)
        return notes

    async def snapshot(self, previous: Snapshot | None = None) -> Snapshot:
        try:
            states = await self._snapshots.take(previous)
        except DockerError as exc:
            self._snapshots.problem = f"no file changes recorded: {exc}"
            states = {}
        if self._snapshots.problem is not None and self._snapshots.problem not in self.warnings:
            self.warnings.append(self._snapshots.problem)
        return states

    async def stop(self) -> None:
        self._observe_oom()
        try:
            await self.container.stop()
        except DockerError as exc:
            self.warnings.append(f"the container could not be stopped: {exc}")
        self._oom_seen = 0

    def resource_problem(self) -> str | None:
        self._observe_oom()
        if not self._oom_pending:
            return None
        self._oom_pending = False
        return f"out of memory: a process was killed at the {self.limits.memory_mb} MB limit"


def _oom_kills(container_id: str) -> int:
    """Out-of-memory kills in the container's memory cgroup (cgroup v1 or v2), 0 when unknown."""
    candidates = (
        (Path(f"/sys/fs/cgroup/memory/docker/{container_id}/memory.oom_control"), "oom_kill "),
        (Path(f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/memory.events"), "oom_kill "),
        (Path(f"/sys/fs/cgroup/docker/{container_id}/memory.events"), "oom_kill "),
    )
    for path, key in candidates:
        with contextlib.suppress(OSError, ValueError):
            for line in path.read_text().splitlines():
                if line.startswith(key):
                    return int(line[len(key) :])
    return 0


class DockerEnvironmentProvider:
    """Containers of the task's own image on this machine's Docker daemon.

    `records` is where image builds are recorded (the artifact store's `builds/`, shared with
    `el dataset build`); `build_network` overrides ENVLOOP_DOCKER_BUILD_NETWORK."""

    def __init__(self, records: BuildRecords, *, build_network: BuildNetwork | None = None) -> None:
        self.records = records
        self.build_network = build_network

    def instance(self, task: HarborTask, spec: TrialSpec) -> AbstractAsyncContextManager[Environment]:
        return self._instance(task, spec)

    @contextlib.asynccontextmanager
    async def _instance(self, task: HarborTask, spec: TrialSpec) -> AsyncIterator[Environment]:
        limits, warnings = resolve_limits(
            task,
            operator_policy(),
            agent_timeout_sec=spec.agent_timeout_sec,
            verifier_timeout_sec=spec.verifier_timeout_sec,
            network_requested=spec.network,
        )
        image, built_id = await self._image(task, warnings)
        network = await self._network(limits)
        workdir, image_user = await _image_config(image, built_id)
        workdir = task.config.environment.workdir or workdir or DEFAULT_WORKDIR
        variables = _checked_env(
            {
                **resolve_env(task.config.environment.env, spec.params),
                "ENVLOOP_JOB_ID": spec.job_id,
                "ENVLOOP_TRIAL_ID": spec.trial_id,
                "ENVLOOP_TASK": spec.task_name,
                "ENVLOOP_ATTEMPT": str(spec.attempt),
                "ENVLOOP_APP_DIR": workdir,
                "ENVLOOP_LOGS_DIR": "/logs",
                "ENVLOOP_TESTS_DIR": "/tests",
                "ENVLOOP_SOLUTION_DIR": "/solution",
            }
        )
        container_spec = ContainerSpec(
            image=image,
            trial_id=spec.trial_id,
            network=network,
            cpus=limits.cpus,
            memory_mb=limits.memory_mb,
            pids=limits.pids,
            file_size_mb=limits.disk_mb,
            env=variables,
            workdir=workdir,
            labels={RUN_LABEL: spec.run_id, JOB_LABEL: spec.job_id},
        )
        warnings.append(f"disk limit {limits.disk_mb} MB is enforced per file only in the docker environment")
        agent_user = _user(task.config.agent.user)
        step_users = ", ".join(
            f"{st.name} {st.config.agent.user}" for st in task.steps if st.config.agent.user
        )
        note = (
            f"docker container of {image}, network {network}; limits: memory {limits.memory_mb} MB "
            f"(cgroup, no swap), cpus {'unlimited' if limits.cpus is None else f'{limits.cpus:g}'}, "
            f"pids {limits.pids}, largest file {limits.disk_mb} MB; agent user "
            f"{agent_user or image_user or 'root'}{f' (steps: {step_users})' if step_users else ''} ; "
            f"effective: {limits.describe()}"
        )
        try:
            container = await Container.start(container_spec)
        except (DockerError, ValueError) as exc:
            raise EnvironmentSetupError(f"the container did not start: {exc}") from None
        environment = DockerEnvironment(
            container=container,
            task=task,
            note=note,
            warnings=warnings,
            limits=limits,
            workdir=workdir,
            secrets=spec.secret_values,
        )
        try:
            await _setup(environment, _agent_users(task))
            yield environment
        finally:
            try:
                await container.remove()
            except DockerError as exc:
                environment.warnings.append(f"the container could not be removed: {exc}")

    async def _image(self, task: HarborTask, warnings: list[str]) -> tuple[str, str | None]:
        """The task's image name and ID, built or found in the cache; each image the operator
        substituted in it is added to the trial's `warnings`."""
        try:
            outcome = await ensure_task_image(
                task.environment_dir,
                task.digest,
                self.records,
                network=self.build_network,
                settings=read_build_settings(task.root),
            )
        except DockerUnavailableError as exc:
            raise EnvironmentSetupError(f"no Docker daemon: {exc} (scripts/docker-daemon start)") from None
        except (BuildConfigError, DockerError) as exc:
            raise EnvironmentSetupError(f"the task's image could not be built: {exc}") from None
        if outcome.status == "failed":
            raise EnvironmentSetupError(f"the task's image did not build: {outcome.reason}")
        warnings += [substitution.describe() for substitution in outcome.substitutions]
        return outcome.image, outcome.image_id

    @staticmethod
    async def _network(limits: EffectiveLimits) -> str:
        """`none`, or the daemon's bridge for a trial that is to have a network."""
        if not limits.network:
            return "none"
        bridge = await docker(["network", "inspect", "bridge"], check=False)
        if bridge.returncode != 0:
            raise EnvironmentSetupError(
                "the trial is to have a network, but this Docker daemon has no bridge network (it was "
                "started with --bridge=none) and a trial never gets the host's: run it with "
                "--environment local, or close its network (ENVLOOP_TRIAL_NETWORK=none)"
            )
        return "bridge"


_IMAGE_CONFIGS: dict[str, tuple[str, str]] = {}
"""WORKDIR and USER by image ID: an image's configuration never changes, so it is read once."""


async def _image_config(image: str, image_id: str | None) -> tuple[str, str]:
    """The image's WORKDIR ("" for none or `/`) and USER."""
    if image_id is not None and image_id in _IMAGE_CONFIGS:
        return _IMAGE_CONFIGS[image_id]
    result = await docker(["image", "inspect", "--format", "{{.Config.WorkingDir}}\t{{.Config.User}}", image])
    workdir, _, user = result.stdout.decode().strip().partition("\t")
    config = (workdir if workdir not in ("", "/") else ""), user
    if image_id is not None:
        _IMAGE_CONFIGS[image_id] = config
    return config


def _agent_users(task: HarborTask) -> dict[str, str]:
    """Every user an agent of this task runs as, by the field that names it: `[agent] user` and
    each step's `[steps.agent] user`."""
    found = {"[agent] user": task.config.agent.user}
    found |= {f"step {step.name!r}: [steps.agent] user": step.config.agent.user for step in task.steps}
    return {field: str(user) for field, user in found.items() if user is not None}


async def _setup(environment: DockerEnvironment, agent_users: dict[str, str]) -> None:
    """The directories every trial has, and a check that each agent user exists in the image
    (before any agent runs, so a later step cannot fail half-way for want of its user)."""
    await environment._root(
        'mkdir -p -- "$1" /logs/agent /logs/verifier "$2" && chmod 1777 /logs/agent "$2" '
        "&& rm -rf /tests /solution",
        environment.visible.app,
        HOME_DIR,
    )
    for field, user in agent_users.items():
        check = await environment.container.exec(["true"], user=user, timeout=_SETUP_TIMEOUT_SEC)
        if check.exit_code != 0:
            why = check.stderr.strip()[-200:]
            raise EnvironmentSetupError(f"{field} = {user!r}: not a user of the task's image ({why})")
