"""`el dataset build`: pre-build the docker environment's image of every task of a revision."""

from typing import Annotated

import typer

from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, note, out, table
from envloop.cli.state import context
from envloop.core.display import format_duration
from envloop.errors import UserError
from envloop.settings import settings


def build(
    ref: Annotated[str, typer.Argument(help="NAME@N or NAME@latest.")],
    network: Annotated[
        str | None,
        typer.Option(
            "--network",
            help="Network of the builds: default, host or none (else ENVLOOP_DOCKER_BUILD_NETWORK).",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Build again even when the image exists.")] = False,
    json_: JsonOpt = False,
) -> None:
    """Build each task's image from its environment/Dockerfile once per task digest, and report
    every task's build (status, duration, cache hit, reason). Exits 1 when a build failed."""
    from envloop.services import builds  # noqa: PLC0415 - the Docker stack loads only for a build
    from envloop.services.builds import TaskBuildView  # noqa: PLC0415

    if settings().url:
        raise UserError(
            "el dataset build runs where the Docker daemon is, on the embedded store: unset ENVLOOP_URL"
        )

    def progress(view: TaskBuildView) -> None:
        if not json_:
            detail = f" ({view.reason})" if view.reason else ""
            note(f"{view.task}: {view.status} in {format_duration(view.duration_sec)}{detail}")
            for substitution in view.substitutions:
                note(f"{view.task}: {substitution}")

    result = builds.build_dataset(context(), ref, network=network, force=force, on_task=progress)
    if json_:
        emit_json(result)
    else:
        out.print(
            table(
                ["task", "status", "cache hit", "took", "reason"],
                [
                    [
                        t.task,
                        t.status,
                        "yes" if t.cache_hit else "no",
                        format_duration(t.duration_sec),
                        t.reason,
                    ]
                    for t in result.tasks
                ],
                title=f"{result.dataset}: {result.built} built, {result.cached} cached, "
                f"{result.failed} failed (network {result.network}, docker {result.docker_version})",
            )
        )
    if result.failed:
        raise typer.Exit(1)
