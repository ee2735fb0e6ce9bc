"""One instance of the `docker` environment: a trial's main container (with its sidecars and
networks, when it has them), used through the Engine API. Made by `DockerEnvironmentProvider`.

- Users: the agent runs as the task's `[agent] user` (a step's own when it names one), else the
  image's USER (Harbor's rule); the verifier as `[verifier] user`, else root.
- The tests, the solution and the verifier's logs are placed by root as fresh copies for the
  commands the base class shows them to, and removed before any later command. Where the image
  has a `/tests` or `/solution` directory of its own, or the agent's working directory is there,
  the task's files are laid over what is there instead and taken back when the command ends
  (laid_over.py): the image keeps working as Harbor leaves it.
- Network policies, the proxy's variables, the model gateway and what the trial could not reach
  are its container's network side (container_network.py).
- Out-of-memory kills are looked for after every command and at `stop` (oom_watch.py).
"""

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from envloop.core.destinations import Destination
from envloop.core.posix_paths import overlap
from envloop.core.trial import SandboxMode, TrialSpec
from envloop.environments.base import EnvironmentSetupError, PathKind, RunOutcome, VisiblePaths
from envloop.environments.capture import BoundedWriter
from envloop.environments.contract import Environment
from envloop.environments.docker.cli import DockerError
from envloop.environments.docker.container_network import ContainerNetwork
from envloop.environments.docker.containers import Container
from envloop.environments.docker.egress import EgressProxies
from envloop.environments.docker.laid_over import lay_over, take_back
from envloop.environments.docker.networks import TrialNetworks
from envloop.environments.docker.oom_watch import OomWatch, container_oom_kills
from envloop.environments.docker.tamper_watch import TamperWatch
from envloop.environments.docker.workspace import ContainerSnapshots
from envloop.environments.keeping import KeepBudget
from envloop.environments.policy import EffectiveLimits
from envloop.environments.tampering import Tampering
from envloop.tasks.model import HarborTask
from envloop.tasks.phases import NetworkPolicy
from envloop.tasks.task_toml import NetworkMode, TaskUser
from envloop.trajectories.workspace import Snapshot

if TYPE_CHECKING:
    from envloop.gateway import ModelGateway  # aiohttp: loaded when a trial first routes a model

HOME_DIR = "/tmp/envloop-home"


def _present(layers: Sequence[Path] | None) -> list[Path]:
    """The layers that exist (a task may lack a solution or tests directory)."""
    return [layer for layer in layers or [] if layer.is_dir()]


def _user(user: TaskUser | None) -> str | None:
    return None if user is None else str(user)


class DockerEnvironment(Environment):
    """One run's container. Build it through `DockerEnvironmentProvider.instance`."""

    default_network: NetworkMode = "public"
    """Harbor's default in a container: a task that names no network gets the internet."""

    mode: SandboxMode = "docker"

    def __init__(
        self,
        *,
        container: Container,
        networks: TrialNetworks,
        egress: EgressProxies,
        task: HarborTask,
        spec: TrialSpec,
        note: str,
        warnings: list[str],
        limits: EffectiveLimits,
        workdir: str,
        sidecars: dict[str, Container],
        defaults: dict[str, str] | None = None,
        oom_kills: Callable[[], int] | None = None,
        service: str | None = None,
    ) -> None:
        super().__init__(
            task=task,
            spec=spec,
            visible=VisiblePaths(
                app=workdir, logs="/logs", tests="/tests", solution="/solution", tmp="/tmp", home=HOME_DIR
            ),
            limits=limits,
            note=note,
            warnings=warnings,
            defaults=defaults or {},
            fresh_home="/tmp/envloop-verifier-home",
        )
        self.container = container
        self._networks = networks
        self._egress = egress
        """Handed on, with `_sidecars`, to the instances of its services (`service`)."""
        self._sidecars = sidecars
        self._services: dict[str, DockerEnvironment] = {}
        self._service = service
        """The compose service this instance is (None: the trial's main container)."""
        self._spec = spec
        self._oom = OomWatch(oom_kills or (lambda: container_oom_kills(container.id)))
        self._snapshots = ContainerSnapshots(container, workdir)
        self._container_network = ContainerNetwork(
            container, networks, egress, sidecars=sidecars, task_root=task.root, service=service
        )
        self._tamper = TamperWatch(container, warnings)
        self._kept: frozenset[str] = frozenset()
        """The tests' and solution's paths whose content stays: the task's files are laid over it."""
        self._laid: set[str] = set()
        """Those of `_kept` the task's files are laid over now."""

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
        try:
            if self.container.stopped:
                await self._container_network.resume()
            outcome = await self.container.exec(
                command,
                # The agent's user is the active step's `[steps.agent] user`, else the task's; a
                # sidecar's is its own.
                user=_user(user) or (None if self._service else _user(self._task.agent_user)),
                cwd=cwd,
                env=env,
                timeout=timeout,
                stdout=stdout,
                stderr=stderr,
            )
        except (DockerError, ValueError) as exc:
            raise EnvironmentSetupError(f"the command could not run in the container: {exc}") from None
        finally:
            self._oom.observe()
        for path in sorted(self._laid):
            # As soon as the command that was shown them ends, not at the next command: what is
            # copied out of the container meanwhile (a working directory handed to a verifier run
            # apart) never carries them. A failure is tried again before the next command.
            with contextlib.suppress(EnvironmentSetupError):
                await self._take_back(path)
        return RunOutcome(exit_code=outcome.exit_code, timed_out=outcome.timed_out)

    async def _reset(self, remove: Sequence[str], make: Sequence[tuple[str, int]] = ()) -> None:
        try:
            await self.container.reset(remove, make)
        except (DockerError, ValueError) as exc:
            raise EnvironmentSetupError(str(exc)) from None

    async def _place(self, path: str, layers: Sequence[Path] | None) -> None:
        await self._prepare([], [(path, layers)])

    async def _clear(self, path: str) -> None:
        await self._reset([path])

    async def keep_image_paths(self) -> None:
        """Decide, before any agent runs, where the task's tests and solution are laid over what
        is there rather than replacing it: where the image has a directory of its own, or the
        agent's working directory is (Harbor leaves both as built)."""
        kept = set()
        for path in (self.visible.tests, self.visible.solution):
            if overlap(path, self.visible.app) or await self._kind(path) == "directory":
                kept.add(path)
        self._kept = frozenset(kept)

    async def _prepare(self, gone: list[str], fresh: list[tuple[str, Sequence[Path] | None]]) -> None:
        """Everything cleared and the empty directories made at once (container.reset), then the
        layers copied in; paths whose content stays have what was laid there taken back first."""
        for path in [*gone, *(path for path, _ in fresh)]:
            if path in self._laid:
                await self._take_back(path)
        gone = [path for path in gone if path not in self._kept]
        laid = [(path, _present(layers)) for path, layers in fresh if path in self._kept]
        fresh = [(path, layers) for path, layers in fresh if path not in self._kept]
        make = [(path, 0o777 if layers is None else 0o755) for path, layers in fresh if not _present(layers)]
        if gone or fresh:
            await self._reset([*gone, *(path for path, _ in fresh)], make)
        try:
            for path, layers in fresh:
                for layer in _present(layers):
                    await self.container.put_dir(layer, path, readable=True)
            for path, present in laid:
                self._laid.add(path)
                await lay_over(self.container, path, present)
        except (DockerError, ValueError) as exc:
            raise EnvironmentSetupError(f"could not copy the tests or solution in: {exc}") from None

    async def _take_back(self, path: str) -> None:
        """Take back what was laid at `path`; the directory it leaves is envloop's doing, not the
        agent's, for the tamper watch."""
        try:
            await take_back(self.container, path)
            self._laid.discard(path)
            await self._tamper.taken_back(path)
        except DockerError as exc:
            raise EnvironmentSetupError(f"could not take the tests or solution back: {exc}") from None

    async def _write(self, path: str, data: bytes) -> None:
        try:
            await self.container.put_file(path, data, mode=0o644)
        except (DockerError, ValueError) as exc:
            raise EnvironmentSetupError(f"could not write {path}: {exc}") from None

    async def _read(self, path: str, max_bytes: int) -> bytes | None:
        try:
            return await self.container.read_file(path, max_bytes=max_bytes)
        except FileNotFoundError:
            return None
        except ValueError as exc:  # longer than max_bytes
            raise OSError(str(exc)) from None
        except DockerError as exc:
            raise OSError(str(exc)) from None

    async def _kind(self, path: str) -> PathKind | None:
        try:
            return await self.container.path_kind(path)
        except DockerError as exc:
            raise EnvironmentSetupError(f"could not look at {path}: {exc}") from None

    async def _copy_in(self, source: Path, path: str) -> None:
        await self._reset([path])
        try:
            await self.container.put_dir(source, path, readable=True)
        except (DockerError, ValueError) as exc:
            raise EnvironmentSetupError(f"could not copy {path} in: {exc}") from None

    async def _copy_out(self, path: str, target: Path, budget: KeepBudget) -> list[str]:
        try:
            report = await self.container.get_dir(
                path, target, max_bytes=budget.bytes, max_entries=budget.files
            )
        except FileNotFoundError:
            return []
        except DockerError as exc:
            return [f"could not be copied out: {exc}"]
        budget.files -= report.files
        budget.bytes -= report.bytes
        return report.skipped

    async def _apply_network(self, policy: NetworkPolicy) -> None:
        await self._container_network.apply(policy)

    def network_variables(self) -> dict[str, str]:
        return self._container_network.variables()

    async def open_gateway(self, gateway: "ModelGateway", trial_id: str) -> str:
        await self.close_gateway()
        url = await self._container_network.open_gateway(gateway, trial_id)
        await self._apply_network(self.network)
        return url

    async def close_gateway(self) -> None:
        if self._container_network.gateway_open:
            await self.release_gateway()
            await self._apply_network(self.network)

    async def release_gateway(self) -> None:
        """Stop serving the container and close the guard again (at teardown: before the bridge
        goes), leaving its networks as they are."""
        await self._container_network.release_gateway()

    async def mark_clean(self) -> None:
        """Remember the container as set up: what changes after this is the agent's doing."""
        await self._tamper.mark_clean()

    async def watch_verifier(self) -> None:
        """Before a verifier runs here: arm the tamper watch (tamper_watch.py). The agent's working
        directory and logs are its own to change (the verifier reads them by design), and what
        envloop writes for the verifier is never the agent's."""
        visible = self.visible
        # The tests' and solution's directories are envloop's only where it made them fresh: in an
        # image's own (`_kept`) the agent's files stay beside the task's, and a verifier may read them.
        laid_fresh = [path for path in (visible.tests, visible.solution) if path not in self._kept]
        await self._tamper.arm([visible.app, visible.logs, *laid_fresh, self.fresh_home])

    async def verifier_tampering(self) -> list[Tampering]:
        """After the verifier `watch_verifier` armed for: the changed files it read, executed or
        followed, by kind. A file an earlier step's verifier was flagged for is not named again."""
        return await self._tamper.found(steps=bool(self._task.steps))

    def service(self, name: str) -> "DockerEnvironment | None":
        """The trial's compose service `name` as an environment of its own (for collect hooks and
        artifacts), masked like this one; None when the trial has no such service."""
        container = self._sidecars.get(name)
        if container is None:
            return None
        if name not in self._services:
            self._services[name] = DockerEnvironment(
                container=container,
                networks=self._networks,
                egress=self._egress,
                task=self._task,
                spec=self._spec,
                note=f"sidecar {name}",
                warnings=self.warnings,
                limits=self.limits,
                workdir=container.spec.workdir or "/",
                sidecars={},
                service=name,
            )
        return self._services[name]

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
        self._oom.observe()
        try:
            await self.container.stop()
        except DockerError as exc:
            self.warnings.append(f"the container could not be stopped: {exc}")
        if self.container.stopped:
            self._oom.count_from_zero()
        await self._container_network.after_stop()

    async def contacted_hosts(self) -> list[str]:
        """Every destination this trial asked its proxies for so far (`host:port` of a tunnel, the
        host of plain HTTP), refused ones included, in the order first asked: its own requests
        alone, though the proxies serve every trial of the worker."""
        return await self._container_network.contacted()

    def destinations(self) -> list[Destination] | None:
        return self._container_network.destinations()

    def resource_problem(self) -> str | None:
        return self._oom.problem(self.limits.memory_mb)

    def network_shortfall(self) -> str | None:
        return self._container_network.shortfall()
