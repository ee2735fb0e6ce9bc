"""The task features envloop does not honour everywhere, found once when a task is pushed.

A Harbor task can ask for things only some environments give (a Dockerfile's `RUN` steps, compose
sidecars, a separate verifier, an egress allowlist run only in a container) or that no environment
of envloop gives (GPUs, Windows containers). Run without them, a task measures the environment
rather than the agent, and its zeros read as the agent's failures. So every such feature is named
at push (stored with the revision, shown by `el dataset show`), and a job whose environment cannot
honour a feature the task needs is refused at submission (services/job_submission.py) unless the
user chooses to leave those tasks out. The same detection backs the check every trial makes when it
starts (`refuse_unsupported`), so push, submission and trial never disagree.
"""

from collections.abc import Sequence

from envloop.environments.base import EnvironmentSetupError
from envloop.tasks.compose import ComposeError, compose_file, read_compose
from envloop.tasks.dockerfile import read_plan
from envloop.tasks.dockerfile_images import read_images
from envloop.tasks.model import HarborTask
from envloop.tasks.phases import task_networks, verifier_modes
from envloop.wire.datasets import ENVIRONMENTS, EnvironmentName, TaskFeature

__all__ = ["ENVIRONMENTS", "EnvironmentName", "TaskFeature", "refuse_unsupported", "task_features"]

_APPROXIMATED_LOCALLY = frozenset({"dockerfile", "prebuilt-image"})
"""Image features the local sandbox stands in for with this host's system: a job asking for the local
environment is refused them at submission, but a trial that ends up there (auto, with no Docker
daemon answering) runs and says what it ran without."""
_WINDOWS_IMAGES = ("mcr.microsoft.com/windows", "mcr.microsoft.com/powershell:", "microsoft/windows")


def _feature(
    name: str, label: str, detail: str, environments: list[EnvironmentName], *, required: bool = True
) -> TaskFeature:
    return TaskFeature(name=name, label=label, detail=detail, environments=environments, required=required)


def task_features(task: HarborTask) -> list[TaskFeature]:
    """Every feature of `task` that some environment does not honour, in a fixed order."""
    config = task.config
    found: list[TaskFeature] = []
    gpus = config.environment.gpus or 0
    if gpus > 0:
        found.append(
            TaskFeature(
                name="gpus",
                label="GPUs",
                detail=f"[environment] gpus = {gpus}",
                environments=[],
                required=True,
                amount=float(gpus),
            )
        )
    windows = _windows(task)
    if windows is not None:
        found.append(_feature("windows", "a Windows container", windows, []))
    compose = compose_file(task.environment_dir)
    if compose is not None:
        try:
            read_compose(task.environment_dir)
        except ComposeError as exc:
            found.append(_feature("compose", "docker-compose settings envloop does not run", str(exc), []))
        else:
            detail = f"environment/{compose.name} (sidecar services)"
            found.append(_feature("compose", "docker-compose sidecar services", detail, ["docker"]))
    separate = _separate_verifiers(task)
    if separate is not None:
        found.append(_feature("separate-verifier", "a separate verifier environment", separate, ["docker"]))
    collect = _collect_hooks(task)
    if collect is not None:
        found.append(_feature("collect-hooks", "verifier collect hooks", collect, ["docker"]))
    allowlist = _allowlists(task)
    if allowlist is not None:
        found.append(_feature("network-allowlist", "a network allowlist", allowlist, ["docker"]))
    if config.environment.mcp_servers:
        names = ", ".join(server.name for server in config.environment.mcp_servers)
        found.append(
            _feature("mcp-servers", "MCP servers for the agent", f"[[environment.mcp_servers]] ({names})",
                     ["docker"], required=False)
        )  # fmt: skip
    found += _image_features(task)
    return found


def _windows(task: HarborTask) -> str | None:
    if task.config.environment.os == "windows":
        return '[environment] os = "windows"'
    dockerfile = task.environment_dir / "Dockerfile"
    try:
        found = read_images(dockerfile.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None
    bases = [use.image for use in found.uses if use.kind == "FROM"]
    image = next((base for base in bases if base.lower().startswith(_WINDOWS_IMAGES)), None)
    return None if image is None else f"environment/Dockerfile FROM {image[:80]}"


def _where(task: HarborTask, flags: list[bool], what: str) -> str | None:
    """`what` at the task level, or the steps that have it."""
    if not any(flags):
        return None
    if not task.config.steps:
        return what
    steps = [step.name for step, flag in zip(task.config.steps, flags, strict=True) if flag]
    return f"{what} in step{'s' if len(steps) > 1 else ''} {', '.join(steps)}"


def _separate_verifiers(task: HarborTask) -> str | None:
    modes = verifier_modes(task.config)
    return _where(task, [mode == "separate" for mode in modes], "[verifier] environment_mode = separate")


def _collect_hooks(task: HarborTask) -> str | None:
    config = task.config
    flags = [bool(config.verifier.collect or step.verifier.collect) for step in config.steps] or [
        bool(config.verifier.collect)
    ]
    return _where(task, flags, "[[verifier.collect]] (commands run before artifacts are collected)")


def _allowlists(task: HarborTask) -> str | None:
    found = sorted(
        {host for networks in task_networks(task.config) for p in networks.policies() for host in p.hosts}
    )
    flags = [
        any(p.mode == "allowlist" for p in networks.policies()) for networks in task_networks(task.config)
    ]
    return _where(task, flags, f'network_mode = "allowlist" ({", ".join(found) or "no host"})')


def _image_features(task: HarborTask) -> list[TaskFeature]:
    prebuilt = task.config.environment.docker_image
    has_dockerfile = (task.environment_dir / "Dockerfile").is_file()
    if not has_dockerfile:
        if prebuilt:
            return [
                _feature("prebuilt-image", "a prebuilt docker_image",
                         f"[environment] docker_image = {prebuilt[:80]!r}", ["docker"])
            ]  # fmt: skip
        return []  # nothing to build a container from: the docker environment refuses it by its image
    try:
        # WORKDIR, ENV, COPY and ADD of the build context are applied locally; a FROM alone is stood in for.
        skipped = read_plan(task).not_stood_in()
    except OSError:
        return []  # an unreadable Dockerfile fails its build or its local setup, naming itself
    if not skipped:
        return []
    listed = ", ".join(f"{count} {name}" for name, count in sorted(skipped.items()))
    return [
        _feature(
            "dockerfile",
            "Dockerfile instructions only a container runs",
            f"environment/Dockerfile instructions the local sandbox does not execute ({listed})",
            ["docker"],
        )
    ]


def refused_in(features: list[TaskFeature], environment: EnvironmentName) -> list[TaskFeature]:
    """The required features `environment` cannot give."""
    return [f for f in features if f.required and not f.honoured_by(environment)]


def refuse_unsupported(
    task: HarborTask, environment: EnvironmentName | None, features: Sequence[TaskFeature] | None = None
) -> list[str]:
    """The check every trial makes before its environment is made: raise EnvironmentSetupError
    naming what `environment` cannot give the task (never run it without), and return a warning for
    each optional feature it runs without (the local sandbox reports the image features it stands in
    for itself). A plugin provider that names no environment honours none. `features` are the
    task's, when the caller found them already (a frozen task copy's, once per process)."""
    if features is None:
        features = task_features(task)
    where = f"the {environment} environment" if environment else "this environment"
    refused = [
        f
        for f in features
        if f.required
        and (environment is None or not f.honoured_by(environment))
        and not (environment == "local" and f.name in _APPROXIMATED_LOCALLY)
    ]
    if refused:
        raise EnvironmentSetupError(f"{refused[0].describe()} ({where} cannot give it)")
    return [
        f"{feature.detail}: the task runs without it in {where}"
        for feature in features
        if not feature.required and (environment is None or not feature.honoured_by(environment))
    ]
