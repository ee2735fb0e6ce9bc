"""A trial's compose sidecars: built, started in dependency order on the trial's own network, waited
for as `depends_on` says, and removed with the trial.

Each sidecar is reached from the main container by its service name (a network alias on the trial's
internal network) and reaches nothing else unless the trial's environment is public. Its image is
built from its `build` context below environment/ (once per task digest, like the task's own) or
is a local `image`. Healthchecks are Docker's own (the daemon probes the container); `depends_on`
waits for `service_started`, `service_healthy` or `service_completed_successfully`, each within the
trial's setup timeout. Every sidecar runs under the trial's cgroup (trial_cgroup.py), so the task's
limits hold for all its containers together.
"""

import asyncio
import time

from envloop.environments.base import EnvironmentSetupError
from envloop.environments.docker.cli import DockerError
from envloop.environments.docker.container_spec import ContainerSpec
from envloop.environments.docker.containers import Container
from envloop.environments.docker.engine import engine, image_id
from envloop.environments.docker.image_owners import foreign_images, foreign_reason
from envloop.environments.docker.images import BuildNetwork, BuildRecords, ensure_task_image
from envloop.environments.docker.networks import TrialNetworks
from envloop.environments.docker.task_images import all_image_builds, sidecar_image_builds
from envloop.tasks.compose import ComposeFile, Dependency, Service
from envloop.tasks.model import HarborTask

_WAIT_SEC = 300.0
_POLL_SEC = 0.25


class Sidecars:
    """The sidecar containers of one run of a trial, by service name."""

    def __init__(
        self,
        compose: ComposeFile,
        task: HarborTask,
        trial_id: str,
        labels: dict[str, str],
        cgroup_parent: str | None,
    ) -> None:
        self.compose = compose
        self._task = task
        self._trial_id = trial_id
        self._labels = labels
        self._cgroup_parent = cgroup_parent
        self.containers: dict[str, Container] = {}

    async def start(
        self,
        networks: TrialNetworks,
        *,
        public: bool,
        records: BuildRecords,
        build_network: BuildNetwork | None,
    ) -> list[str]:
        """Build and start every sidecar, each after what it depends on; setup log lines."""
        lines = []
        internal = await networks.internal()
        for name in self.compose.startup_order():
            service = self.compose.sidecars[name]
            await self.wait_for(service.depends_on)
            image, substitutions = await self._image(name, service, records, build_network)
            lines += substitutions
            spec = ContainerSpec(
                image=image,
                trial_id=self._trial_id,
                name=None,
                network=internal,
                aliases=[name],
                pids=None,
                cgroup_parent=self._cgroup_parent,
                env=service.environment,
                workdir=service.working_dir,
                user=service.user,
                command=_words(service.command) if service.command is not None else [],
                entrypoint=_words(service.entrypoint) if service.entrypoint is not None else None,
                healthcheck=_healthcheck(service),
                labels=self._labels | {"envloop.service": name},
            )
            try:
                self.containers[name] = await Container.start(spec)
                if public:
                    # No alias there: the trial's containers reach each other on the internal
                    # network alone (the public one isolates them), so a name must resolve there.
                    await networks.connect(self.containers[name].id, await networks.public())
            except (DockerError, ValueError) as exc:
                raise EnvironmentSetupError(f"sidecar {name!r} did not start: {exc}") from None
            lines.append(f"sidecar {name}: started from {image}")
        await self.wait_for(self.compose.main.depends_on)
        return lines

    async def _image(
        self, name: str, service: Service, records: BuildRecords, build_network: BuildNetwork | None
    ) -> tuple[str, list[str]]:
        """The sidecar's image, and a line per image the operator substituted in it."""
        if service.build is None:
            assert service.image is not None
            if await image_id(service.image) is None:
                raise EnvironmentSetupError(
                    f"sidecar {name!r}: image {service.image} is not on this machine (nothing can be pulled)"
                )
            own = {build.digest for build in all_image_builds(self._task)}
            if await foreign_images([service.image], own):
                raise EnvironmentSetupError(foreign_reason(f"sidecar {name!r}: image {service.image}"))
            return service.image, []
        build = next(b for b in sidecar_image_builds(self._task) if b.role == f"sidecar {name}")
        outcome = await ensure_task_image(
            build.context, build.digest, records, network=build_network, settings=build.settings
        )
        if outcome.status == "failed":
            raise EnvironmentSetupError(f"sidecar {name!r}: its image did not build: {outcome.reason}")
        return outcome.image, [f"sidecar {name}: {s.describe()}" for s in outcome.substitutions]

    async def wait_for(self, dependencies: dict[str, Dependency]) -> None:
        """Wait until each dependency meets its condition; EnvironmentSetupError when one cannot."""
        for name, dependency in dependencies.items():
            container = self.containers[name]
            deadline = time.monotonic() + _WAIT_SEC
            while True:
                state = (await engine().json("GET", f"/containers/{container.id}/json"))["State"]
                met, failed = _condition(dependency, state)
                if met:
                    break
                if failed is not None:
                    raise EnvironmentSetupError(f"sidecar {name!r}: {failed}")
                if time.monotonic() > deadline:
                    raise EnvironmentSetupError(
                        f"sidecar {name!r} did not reach {dependency.condition} within {_WAIT_SEC:g} s"
                    )
                await asyncio.sleep(_POLL_SEC)

    async def remove(self) -> list[str]:
        problems = []
        for name, container in self.containers.items():
            try:
                await container.remove()
            except DockerError as exc:
                problems.append(f"sidecar {name!r} could not be removed: {exc}")
        self.containers = {}
        return problems


def _condition(dependency: Dependency, state: dict[str, object]) -> tuple[bool, str | None]:
    """(met, why it never will be)."""
    status = str(state.get("Status"))
    code = state.get("ExitCode")
    if dependency.condition == "service_completed_successfully":
        if status == "exited":
            return (code == 0), None if code == 0 else f"exited with code {code} before the trial"
        return False, None
    if status in ("exited", "dead"):
        return False, f"stopped (exit code {code}) before the trial started"
    if dependency.condition == "service_started":
        return status == "running", None
    health = state.get("Health")
    verdict = str(health.get("Status")) if isinstance(health, dict) else ""
    if not verdict:
        return False, "has no healthcheck, and the trial waits for it to be healthy"
    if verdict == "unhealthy":
        return False, "its healthcheck failed"
    return verdict == "healthy", None


def _words(value: list[str] | str) -> list[str]:
    return ["sh", "-c", value] if isinstance(value, str) else list(value)


def _healthcheck(service: Service) -> dict[str, object] | None:
    """The service's compose healthcheck as the daemon takes it (durations in nanoseconds)."""
    check = service.healthcheck
    if check is None:
        return None
    command = check.command()
    if command is None:
        return {"Test": ["NONE"]}
    return {
        "Test": ["CMD", *command],
        "Interval": int(check.interval * 1e9),
        "Timeout": int(check.timeout * 1e9),
        "Retries": check.retries,
        "StartPeriod": int(check.start_period * 1e9),
    }
