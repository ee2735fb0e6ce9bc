"""The `docker` environment: each run of a trial in containers of its task's own images.

The image is built from the task's `environment/Dockerfile` once per task digest (or found in the
cache); a task whose build failed is an `environment_error` naming the build's reason. Each run
gets a main container (and the task's compose sidecars, on a network of the trial's own), labelled
with its trial and worker and removed on every way out (a crashed worker's are swept when the next
worker starts). Nothing of the host is mounted: files cross as tar streams.

A separate verifier (Harbor's `environment_mode = "separate"`) gets a container of its own, from an
image built from the task's (or the step's) `tests/` (`verifier_instance`).

- Network: Harbor's default (`public`) unless the task names a policy: `public` is the internet and
  nothing of the host, `allowlist` only the named hosts, switched per phase, on bridges and proxies
  the worker's trials share (shared_egress.py) and the trial's own networks where it has sidecars
  (networks.py).
- Limits: memory (no swap beyond it), cpus and pids are the container's cgroup limits, from the
  task capped by the operator's ceilings; disk is a largest-file limit only (no quota).
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Literal

from envloop.core.trial import TrialSpec
from envloop.environments.base import EnvironmentSetupError
from envloop.environments.contract import Environment
from envloop.environments.docker.cli import DockerError, DockerUnavailableError
from envloop.environments.docker.container_spec import ContainerSpec
from envloop.environments.docker.containers import Container
from envloop.environments.docker.egress import EgressProxies, proxy_hosts
from envloop.environments.docker.engine import NotFoundError, engine
from envloop.environments.docker.environment import HOME_DIR, DockerEnvironment
from envloop.environments.docker.images import (
    BuildConfigError,
    BuildNetwork,
    BuildRecords,
    ensure_task_image,
)
from envloop.environments.docker.networks import TrialNetworks
from envloop.environments.docker.shared_egress import shared_network
from envloop.environments.docker.sidecars import Sidecars
from envloop.environments.docker.task_images import ImageBuild, task_image_build, verifier_image_build
from envloop.environments.docker.trial_cgroup import TrialCgroup
from envloop.environments.docker.workspace import PRIVATE_DIR
from envloop.environments.policy import EffectiveLimits, operator_policy, resolve_limits
from envloop.environments.shielded import finish_even_if_cancelled
from envloop.tasks.compose import ComposeError, ComposeFile, read_compose
from envloop.tasks.model import HarborTask, TaskStep
from envloop.tasks.phases import NO_NETWORK, NetworkPolicy, phase_networks, task_networks
from envloop.tasks.phases import verifier_environment as verifier_section

RUN_LABEL = "envloop.run"
JOB_LABEL = "envloop.job"
DEFAULT_WORKDIR = "/app"
_SETUP_TIMEOUT_SEC = 120.0


class DockerEnvironmentProvider:
    """Containers of the task's own images on this machine's Docker daemon.

    `records` is where image builds are recorded (the artifact store's `builds/`, shared with
    `el dataset build`); `build_network` overrides ENVLOOP_DOCKER_BUILD_NETWORK."""

    honours = "docker"

    def __init__(self, records: BuildRecords, *, build_network: BuildNetwork | None = None) -> None:
        self.records = records
        self.build_network = build_network

    def instance(self, task: HarborTask, spec: TrialSpec) -> AbstractAsyncContextManager[Environment]:
        return self._instance(task, spec, _Role("agent"))

    def verifier_instance(
        self, task: HarborTask, spec: TrialSpec, step: TaskStep | None, *, task_image: bool = False
    ) -> AbstractAsyncContextManager[Environment]:
        """A separate verifier's environment for the task (or one of its steps): from the image
        Harbor's separate mode builds from tests/, or (`task_image`, for jobs that run every
        verifier apart) a fresh container of the task's own image."""
        return self._instance(task, spec, _Role("verifier-copy" if task_image else "verifier", step))

    @contextlib.asynccontextmanager
    async def _instance(self, task: HarborTask, spec: TrialSpec, role: "_Role") -> AsyncIterator[Environment]:
        plan = await self._plan(task, spec, role)
        limits, warnings = plan.limits, plan.warnings
        labels = {RUN_LABEL: spec.run_id, JOB_LABEL: spec.job_id}
        run = _Run(TrialNetworks(f"{spec.run_id}-{plan.role}", spec.trial_id), EgressProxies())
        environment: DockerEnvironment | None = None
        try:
            if plan.compose is not None:
                run.cgroup = TrialCgroup(f"{spec.run_id}-{plan.role}")
                shared = run.cgroup.create(limits)
                if shared is not None:
                    warnings.append(f"{shared}: each container has the trial's limits of its own")
                    run.cgroup = None
                run.sidecars = Sidecars(
                    plan.compose, task, spec.trial_id, labels, run.cgroup.path if run.cgroup else None
                )
                warnings += await run.sidecars.start(
                    run.networks,
                    public=plan.baseline.mode == "public",
                    records=self.records,
                    build_network=self.build_network,
                )
            network = await _first_network(plan, run.networks)
            if plan.needs_network and (hosts := proxy_hosts(plan.baseline)) is not None:
                run.egress.prestart(hosts)  # beside the container, not after it
            observer = await run.egress.observe_lookups() if plan.public else None
            if plan.public and observer is None:
                warnings.append(
                    "the names the trial looks up itself are not recorded: the DNS observer could "
                    "not listen on the public bridge"
                )
            container_spec = ContainerSpec(
                image=plan.image,
                trial_id=spec.trial_id,
                network=network,
                aliases=["main"] if network == run.networks.internal_name else [],
                dns=[observer.address] if observer is not None else [],
                cpus=limits.cpus,
                memory_mb=limits.memory_mb,
                pids=limits.pids,
                file_size_mb=limits.disk_mb,
                cgroup_parent=run.cgroup.path if run.cgroup else None,
                workdir=plan.workdir,
                labels=labels,
            )
            try:
                run.container = await Container.start(container_spec)
            except (DockerError, ValueError) as exc:
                raise EnvironmentSetupError(f"the container did not start: {exc}") from None
            warnings.append(
                f"disk limit {limits.disk_mb} MB is enforced per file only in the docker environment"
            )
            cgroup = run.cgroup
            environment = DockerEnvironment(
                container=run.container,
                networks=run.networks,
                egress=run.egress,
                task=task,
                spec=spec,
                note=plan.note,
                warnings=warnings,
                limits=limits,
                workdir=plan.workdir,
                sidecars=run.sidecars.containers if run.sidecars else {},
                defaults=plan.compose.main.environment if plan.compose else None,
                oom_kills=cgroup.oom_kills if cgroup is not None else None,
            )
            if plan.needs_network:
                await environment.enter_network(plan.baseline)
            if role.kind == "agent":
                await _setup(environment, _agent_users(task), verifier=False)
                await environment.mark_clean()
            else:
                await _setup(environment, {}, verifier=role.kind == "verifier")
            yield environment
        finally:
            if environment is not None:
                # A gateway listener left open (a phase cut short) goes before its bridge does.
                await finish_even_if_cancelled(environment.release_gateway())
            problems = await finish_even_if_cancelled(run.teardown())
            if environment is not None:
                environment.warnings.extend(problems)

    async def _plan(self, task: HarborTask, spec: TrialSpec, role: "_Role") -> "_Plan":
        """What one instance is made of: its image, limits, baseline network and sidecars."""
        step = role.step.config if role.step is not None else None
        separate = verifier_section(task.config, step)
        section = separate if role.kind == "verifier" else task.config.environment
        if section is None:  # the caller asked for a separate verifier the task does not have
            raise EnvironmentSetupError("this verifier runs in the agent's environment")
        limits, warnings = resolve_limits(
            task,
            operator_policy(),
            section=section,
            agent_timeout_sec=spec.agent_timeout_sec,
            verifier_timeout_sec=spec.verifier_timeout_sec,
        )
        compose = None
        networks_of = phase_networks(task.config, step, DockerEnvironment.default_network)
        if role.kind == "verifier":
            build = verifier_image_build(task, role.step)
            assert build is not None  # the section above exists
            image, image_id = await self._image(build, warnings)
            baseline = networks_of.verifier_baseline or NO_NETWORK
            policies = [baseline, networks_of.verifier]
        else:
            image, image_id = await self._image(task_image_build(task), warnings)
            everything = task_networks(task.config, DockerEnvironment.default_network)
            policies = [p for networks in everything for p in (networks.baseline, networks.agent)]
            policies += [n.verifier for n in everything if n.verifier_baseline is None]
            baseline = networks_of.baseline
            if role.kind == "agent":
                try:
                    compose = read_compose(task.environment_dir)
                except ComposeError as exc:
                    raise EnvironmentSetupError(str(exc)) from None
            else:
                baseline, policies = networks_of.verifier, [networks_of.verifier]
        if spec.network and role.kind == "agent":
            policies.append(NetworkPolicy(mode="public"))
        if not limits.network:
            baseline = NO_NETWORK
        workdir, image_user = await _image_config(image, image_id)
        return _Plan(
            role=role.name,
            image=image,
            limits=limits,
            warnings=warnings,
            workdir=section.workdir or workdir or DEFAULT_WORKDIR,
            baseline=baseline,
            needs_network=compose is not None
            or (limits.network and any(p.mode != "no-network" for p in policies)),
            public=limits.network and any(p.mode == "public" for p in policies),
            compose=compose,
            note=_note(image, limits, task, image_user, role.name),
        )

    async def _image(self, build: ImageBuild, warnings: list[str]) -> tuple[str, str | None]:
        """The image `build` describes, built or found in the cache, and its ID; each image the
        operator substituted in it is added to the trial's `warnings`."""
        try:
            outcome = await ensure_task_image(
                build.context, build.digest, self.records, network=self.build_network, settings=build.settings
            )
        except DockerUnavailableError as exc:
            raise EnvironmentSetupError(f"no Docker daemon: {exc} (scripts/docker-daemon start)") from None
        except (BuildConfigError, DockerError) as exc:
            raise EnvironmentSetupError(f"the task's image could not be built: {exc}") from None
        if outcome.status == "failed":
            raise EnvironmentSetupError(f"the task's image did not build: {outcome.reason}")
        warnings += [substitution.describe() for substitution in outcome.substitutions]
        return outcome.image, outcome.image_id


@dataclass(frozen=True)
class _Role:
    """Whose instance: the agent's, a separate verifier's (Harbor's, from tests/), or a verifier's
    fresh copy of the task's own image; of the whole task or one step."""

    kind: Literal["agent", "verifier", "verifier-copy"]
    step: TaskStep | None = None

    @property
    def name(self) -> str:
        return self.kind if self.step is None else f"{self.kind}-{self.step.name}"


@dataclass
class _Plan:
    role: str
    image: str
    limits: EffectiveLimits
    warnings: list[str]
    workdir: str
    baseline: NetworkPolicy
    needs_network: bool
    public: bool
    """Whether a phase is `public`: the container resolves names through the DNS observer."""
    compose: ComposeFile | None
    note: str


@dataclass
class _Run:
    """What one instance made, all of it removed on every way out (containers before networks and
    the cgroup they use)."""

    networks: TrialNetworks
    egress: EgressProxies
    container: Container | None = None
    sidecars: Sidecars | None = None
    cgroup: TrialCgroup | None = None

    async def teardown(self) -> list[str]:
        """The containers go at once, then the trial's hold on the shared bridges and proxies, its
        own networks and the cgroup they used."""
        found = await asyncio.gather(self._remove_container(), self._remove_sidecars())
        problems = [problem for listed in found for problem in listed]
        problems += await self._release_egress()
        problems += await self.networks.remove()
        if self.cgroup is not None:
            problems += [f"cgroup {left} could not be removed" for left in self.cgroup.remove()]
        return problems

    async def _remove_container(self) -> list[str]:
        try:
            if self.container is not None:
                await self.container.remove()
        except DockerError as exc:
            return [f"the container could not be removed: {exc}"]
        return []

    async def _remove_sidecars(self) -> list[str]:
        return await self.sidecars.remove() if self.sidecars is not None else []

    async def _release_egress(self) -> list[str]:
        try:
            await self.egress.remove()
        except (DockerError, EnvironmentSetupError) as exc:
            return [f"the trial's egress could not be released: {exc}"]
        return []


async def _first_network(plan: "_Plan", networks: TrialNetworks) -> str:
    """The network the container starts on: `none` when no phase needs one; the worker's shared
    bridge of a public or allowlist baseline (nothing made for the trial); else the trial's own
    internal network (sidecars; a closed baseline with later phases that open: a container started
    on `none` cannot be attached to anything later, and an internal network has no route out)."""
    if not plan.needs_network:
        return "none"
    if plan.compose is None and plan.baseline.mode in ("public", "allowlist"):
        return (await shared_network(plan.baseline.mode)).name
    return await networks.internal()


def _note(image: str, limits: EffectiveLimits, task: HarborTask, image_user: str, role: str) -> str:
    step_users = ", ".join(f"{st.name} {st.config.agent.user}" for st in task.steps if st.config.agent.user)
    agent_user = task.config.agent.user
    users = (
        f"agent user {agent_user or image_user or 'root'}{f' (steps: {step_users})' if step_users else ''}"
    )
    cpus = "unlimited" if limits.cpus is None else f"{limits.cpus:g}"
    return (
        f"docker container of {image} ({role}); limits: memory {limits.memory_mb} MB (cgroup, no swap), "
        f"cpus {cpus}, pids {limits.pids}, largest file {limits.disk_mb} MB; {users}; "
        f"effective: {limits.describe()}"
    )


_IMAGE_CONFIGS: dict[str, tuple[str, str]] = {}
"""WORKDIR and USER by image ID: an image's configuration never changes, so it is read once."""


async def _image_config(image: str, image_id: str | None) -> tuple[str, str]:
    """The image's WORKDIR ("" for none or `/`) and USER."""
    if image_id is not None and image_id in _IMAGE_CONFIGS:
        return _IMAGE_CONFIGS[image_id]
    try:
        inspected = await engine().json("GET", f"/images/{image}/json")
    except NotFoundError:
        raise EnvironmentSetupError(f"the image {image} is gone") from None
    config = inspected.get("Config") or {}
    workdir = str(config.get("WorkingDir") or "")
    found = (workdir if workdir not in ("", "/") else ""), str(config.get("User") or "")
    if image_id is not None:
        _IMAGE_CONFIGS[image_id] = found
    return found


def _agent_users(task: HarborTask) -> dict[str, str]:
    """Every user an agent of this task runs as, by the field that names it: `[agent] user` and
    each step's `[steps.agent] user`."""
    found = {"[agent] user": task.config.agent.user}
    found |= {f"step {step.name!r}: [steps.agent] user": step.config.agent.user for step in task.steps}
    return {field: str(user) for field, user in found.items() if user is not None}


async def _setup(environment: DockerEnvironment, agent_users: dict[str, str], *, verifier: bool) -> None:
    """The directories every trial has, and a check that each agent user exists in the image
    (before any agent runs, so a later step cannot fail half-way for want of its user). The image's
    own `/tests` and `/solution` stay as built (Harbor's): the task's files are laid over them when
    their time comes (environment.keep_image_paths); a separate verifier's image holds its tests.
    One archive upload makes the directories."""
    container = environment.container
    app = environment.visible.app
    try:
        app_kind = await container.path_kind(app)
        if app_kind not in (None, "directory"):
            raise EnvironmentSetupError(f"the working directory {app} is not a directory in the image")
        directories = [
            ("/logs/agent", 0o1777),
            ("/logs/verifier", 0o755),
            (HOME_DIR, 0o1777),
            (PRIVATE_DIR, 0o700),
        ]
        await container.make_directories(directories + ([(app, 0o755)] if app_kind is None else []))
    except DockerError as exc:
        raise EnvironmentSetupError(f"setting up the container failed: {exc}") from None
    if not verifier:
        await environment.keep_image_paths()
    for field, user in agent_users.items():
        check = await environment.container.exec(["true"], user=user, timeout=_SETUP_TIMEOUT_SEC)
        if check.exit_code != 0:
            why = check.stderr.strip()[-200:]
            raise EnvironmentSetupError(f"{field} = {user!r}: not a user of the task's image ({why})")
