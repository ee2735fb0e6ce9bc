"""Submission-time refusal of tasks whose images this machine neither has nor can make.

Nothing can be pulled here, so a task whose Dockerfile needs an image that is not on this machine
and that envloop cannot make (`alpine:3.22`, a CUDA or Windows image, `python:3.12-slim` without a
substitution) can only fail its build: every trial would be an environment error that says
nothing of the agent. A job that would run such a task in a container is refused naming the task,
the image and why, before anything is created; with skip_unsupported the other tasks run, and the
job keeps which tasks it left out and why.

Cheap for every task of a dataset: one `docker image ls` for the whole job, and each task's
Dockerfile read from its unpacked copy (unpacked once per machine, as a worker does). Where no
daemon answers (a server whose workers run elsewhere) nothing is refused and the job says so.
"""

from envloop.errors import UserError
from envloop.services.context import Context
from envloop.store.tables import DatasetMember
from envloop.wire.jobs import SkippedTask


def tasks_missing_images(
    ctx: Context, members: list[DatasetMember], skip_unsupported: bool, warnings: list[str]
) -> list[SkippedTask]:
    """The tasks among `members` (those the job runs in containers) whose images cannot be had:
    the job is refused naming them, or (with skip_unsupported) they are left out and `warnings`
    says so. A bad ENVLOOP_IMAGE_SUBSTITUTES is a UserError naming it."""
    if not members:
        return []
    # Imported here, by submission: reading jobs must not load the Docker environment.
    from envloop.environments.docker.availability import (  # noqa: PLC0415
        MissingImage,
        missing_images,
        present_images,
    )
    from envloop.environments.docker.images import (  # noqa: PLC0415
        BuildConfigError,
        build_plan,
        image_substitutes,
        read_build_settings,
    )
    from envloop.environments.docker.references import normalized  # noqa: PLC0415

    try:
        substitutes = image_substitutes()
    except BuildConfigError as exc:
        raise UserError(str(exc)) from None
    present = present_images()
    if present is None:
        warnings.append(
            "the tasks' images were not checked: no Docker daemon answers here (a task whose image "
            "cannot be built fails each of its trials with the reason)"
        )
        return []
    left_out: list[SkippedTask] = []
    refused = False
    for member in members:
        root = ctx.artifacts.task_dir(member.digest)
        settings = read_build_settings(root)
        plan = build_plan(root / "environment", settings, substitutes)
        missing = missing_images(plan, present) if plan is not None else []
        prebuilt = settings.docker_image
        if prebuilt is not None and normalized(prebuilt) not in present:
            missing = [MissingImage(f"docker_image {prebuilt}", "not available on this machine")]
        if missing:
            reason = f"its image cannot be built here: {missing[0].describe()}"
            left_out.append(SkippedTask(task=member.name, reason=reason))
            refused = refused or missing[0].refused
    if left_out and not skip_unsupported:
        shown = "; ".join(
            f"{item.task} ({item.reason.removeprefix('its image cannot be built here: ')})"
            for item in left_out[:5]
        )
        shown += f"; and {len(left_out) - 5} more" if len(left_out) > 5 else ""
        if refused:
            raise UserError(
                f"{len(left_out)} task(s) cannot be built here: {shown} (pass --skip-unsupported to run "
                "the other tasks)"
            )
        raise UserError(
            f"{len(left_out)} task(s) need an image this machine neither has nor can make: {shown} "
            "(nothing can be pulled here: make it with scripts/docker-base-images where it can be, "
            "substitute it with ENVLOOP_IMAGE_SUBSTITUTES, or pass --skip-unsupported to run the other tasks)"
        )
    warnings += [f"task {item.task} not run: {item.reason}" for item in left_out]
    return left_out
