"""Task images for the docker environment: pre-building a dataset revision's, and reading builds back.

Each distinct task digest of the revision is built once (or found in the image cache), one after
the other: builds are CPU- and disk-bound, and a machine has few cores. The outcome of every build
is recorded beside the task archives (see `envloop.environments.docker.images`), so a job can later
refuse to start trials of a task whose image failed to build, naming it and the reason.
"""

import asyncio
import time
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from envloop.environments.docker.cli import DockerUnavailableError, daemon_version
from envloop.environments.docker.images import (
    BuildConfigError,
    BuildNetwork,
    BuildOutcome,
    BuildRecord,
    BuildRecords,
    build_network,
    build_plan,
    effective_build_network,
    ensure_task_image,
    image_key,
    image_substitutes,
    read_build_settings,
)
from envloop.environments.docker.task_images import all_image_builds
from envloop.errors import UserError
from envloop.services.context import Context
from envloop.services.datasets import dataset_members, resolve_dataset
from envloop.services.refs import dataset_ref
from envloop.tasks.harbor import load_harbor_task
from envloop.tasks.model import HarborTask


class TaskBuildView(BaseModel):
    task: str
    digest: str
    image: str
    status: Literal["built", "cached", "failed"]
    cache_hit: bool
    duration_sec: float
    reason: str | None = None
    substitutions: list[str] = []
    """One line per image the operator substituted (ENVLOOP_IMAGE_SUBSTITUTES)."""


class DatasetBuildView(BaseModel):
    dataset: str
    network: BuildNetwork
    docker_version: str
    built: int
    cached: int
    failed: int
    duration_sec: float
    tasks: list[TaskBuildView]


def build_records(ctx: Context) -> BuildRecords:
    """Where build records live: `builds/` beside the task archives of the artifact store."""
    return BuildRecords(ctx.artifacts.root / "builds")


def task_build(ctx: Context, digest: str) -> BuildRecord | None:
    """The last recorded build of the task's image as it would be built now (under the
    substitutions that apply to it today), or None when it was never built so here."""
    substitutes = image_substitutes()
    key = digest
    if substitutes:
        root = ctx.artifacts.task_dir(digest)
        key = image_key(digest, build_plan(root / "environment", read_build_settings(root), substitutes))
    return build_records(ctx).read(key)


async def _build_task(
    task: HarborTask, records: BuildRecords, network: BuildNetwork, force: bool
) -> BuildOutcome:
    """Every image of the task (its own, its sidecars', its separate verifiers'), as one outcome:
    the task's own image, failed when any of them failed (the reason naming which)."""
    outcomes = []
    for build in all_image_builds(task):
        outcome = await ensure_task_image(
            build.context, build.digest, records, network=network, force=force, settings=build.settings
        )
        outcomes.append((build.role, outcome))
        if outcome.status == "failed":
            break
    own = outcomes[0][1]
    failed = next(((role, o) for role, o in outcomes if o.status == "failed"), None)
    statuses = {o.status for _, o in outcomes}
    return own.model_copy(
        update={
            "status": "failed" if failed else ("built" if "built" in statuses else "cached"),
            "cache_hit": statuses == {"cached"},
            "duration_sec": sum(o.duration_sec for _, o in outcomes),
            "reason": None
            if failed is None
            else (failed[1].reason if failed[0] == "task" else f"{failed[0]}: {failed[1].reason}"),
            "substitutions": [s for _, o in outcomes for s in o.substitutions],
        }
    )


def build_dataset(
    ctx: Context,
    ref: str,
    *,
    network: str | None = None,
    force: bool = False,
    on_task: Callable[[TaskBuildView], None] | None = None,
) -> DatasetBuildView:
    """Build (or find cached) the image of every task of a revision; `on_task` hears each result.

    Bad input (unknown revision, a JSONL revision, a bad network name) and an unreachable daemon
    are UserErrors; a task whose image fails to build is reported in the view, not raised.
    """
    try:
        build_network(network)
        image_substitutes()
    except BuildConfigError as exc:
        raise UserError(str(exc)) from None
    with ctx.store.read() as session:
        row = resolve_dataset(session, ctx.project_id, ref)
        revision = dataset_ref(row.name, row.version)
        if row.kind != "harbor":
            raise UserError(f"{revision} holds {row.kind} rows, which run without an image: nothing to build")
        members = [(m.name, m.digest) for m in dataset_members(session, row.id)]
    return asyncio.run(_build_all(ctx, revision, members, network, force, on_task))


async def _build_all(
    ctx: Context,
    revision: str,
    members: list[tuple[str, str]],
    requested: str | None,
    force: bool,
    on_task: Callable[[TaskBuildView], None] | None,
) -> DatasetBuildView:
    try:
        version = await daemon_version()
    except DockerUnavailableError as exc:
        raise UserError(f"cannot build images: {exc} (start one with scripts/docker-daemon start)") from None
    network = await effective_build_network(requested)
    records = build_records(ctx)
    started = time.monotonic()
    done: dict[str, BuildOutcome] = {}
    views: list[TaskBuildView] = []
    for name, digest in members:
        outcome = done.get(digest)
        if outcome is None:
            task = load_harbor_task(ctx.artifacts.task_dir(digest), name=name)
            outcome = await _build_task(task, records, network, force)
            done[digest] = outcome
        elif outcome.status != "failed":
            # A second member with the same content uses the image the first one just got.
            outcome = outcome.model_copy(update={"status": "cached", "cache_hit": True, "duration_sec": 0.0})
        view = TaskBuildView(
            task=name,
            digest=digest,
            image=outcome.image,
            status=outcome.status,
            cache_hit=outcome.cache_hit,
            duration_sec=round(outcome.duration_sec, 3),
            reason=outcome.reason,
            substitutions=[substitution.describe() for substitution in outcome.substitutions],
        )
        views.append(view)
        if on_task is not None:
            on_task(view)
    return DatasetBuildView(
        dataset=revision,
        network=network,
        docker_version=version,
        built=sum(v.status == "built" for v in views),
        cached=sum(v.status == "cached" for v in views),
        failed=sum(v.status == "failed" for v in views),
        duration_sec=round(time.monotonic() - started, 3),
        tasks=views,
    )
