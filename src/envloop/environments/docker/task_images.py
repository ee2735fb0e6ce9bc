"""Every image one task runs in: its own, each compose sidecar's, and each separate verifier's.

One list, used by the trial (which builds what it needs, or finds it cached) and by `el dataset
build` (which builds them all ahead), so both name and cache each image the same way: by the task's
content digest and the image's role in it.
"""

import hashlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from envloop.environments.docker.images import BuildSettings
from envloop.tasks.compose import ComposeError, read_compose
from envloop.tasks.model import HarborTask, TaskStep
from envloop.tasks.phases import verifier_context, verifier_environment
from envloop.tasks.task_toml import EnvironmentSection


class ImageBuild(BaseModel):
    """One image of a task: where it is built from, under which cache key, and how."""

    model_config = ConfigDict(frozen=True)

    role: str
    """`task`, `sidecar NAME` or `verifier` / `verifier of step NAME`."""
    context: Path
    digest: str
    settings: BuildSettings


def _derived(task: HarborTask, role: str) -> str:
    return "sha256:" + hashlib.sha256(f"{task.digest}#{role}".encode()).hexdigest()


def _settings(section: EnvironmentSection) -> BuildSettings:
    return BuildSettings(build_timeout_sec=section.build_timeout_sec, docker_image=section.docker_image)


def task_image_build(task: HarborTask) -> ImageBuild:
    return ImageBuild(
        role="task",
        context=task.environment_dir,
        digest=task.digest,
        settings=_settings(task.config.environment),
    )


def verifier_image_build(task: HarborTask, step: TaskStep | None) -> ImageBuild | None:
    """The image of the task's (or step's) separate verifier, built from its tests/; None when that
    verifier runs in the agent's environment."""
    section = verifier_environment(task.config, step.config if step else None)
    if section is None:
        return None
    context = verifier_context(task, step)
    relative = context.relative_to(task.root).as_posix()
    role = "verifier" if step is None else f"verifier of step {step.name}"
    return ImageBuild(
        role=role, context=context, digest=_derived(task, f"verifier:{relative}"), settings=_settings(section)
    )


def sidecar_image_builds(task: HarborTask) -> list[ImageBuild]:
    """The sidecars built from a context (a sidecar naming a local `image` builds nothing)."""
    try:
        compose = read_compose(task.environment_dir)
    except ComposeError:
        return []  # refused at push; a trial says why
    if compose is None:
        return []
    return [
        ImageBuild(
            role=f"sidecar {name}",
            context=task.environment_dir / service.build.context,
            digest=_derived(task, f"sidecar:{name}"),
            settings=BuildSettings(dockerfile=service.build.dockerfile, build_args=service.build.args),
        )
        for name, service in sorted(compose.sidecars.items())
        if service.build is not None
    ]


def all_image_builds(task: HarborTask) -> list[ImageBuild]:
    """Every image the task's trials may run in, its own first; each separate verifier's once."""
    builds = [task_image_build(task), *sidecar_image_builds(task)]
    steps: list[TaskStep | None] = list(task.steps) or [None]
    for step in steps:
        found = verifier_image_build(task, step)
        if found is not None and found.digest not in {b.digest for b in builds}:
            builds.append(found)
    return builds
