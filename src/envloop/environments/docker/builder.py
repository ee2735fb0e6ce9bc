"""One `docker build` of a prepared Dockerfile, after naming what the daemon lacks or making it.

Before the builder runs, the images the Dockerfile needs are looked up with one `docker image ls`:
one this machine can neither have nor make fails the build naming it and why (the builder would
only report a registry error), and one of uv's is made from its wheel (under a lock, so concurrent
builds make it once). What the build does differently from a plain `docker build` (a substitution,
a frontend served by the built-in one, an image made on the way) heads its log and is kept in
its record; the Dockerfile that was built is kept beside them when it differs from the task's.
"""

import asyncio
import contextlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from envloop.environments.capture import BoundedWriter, PipePump
from envloop.environments.docker.availability import missing_images, present_images
from envloop.environments.docker.build_reach import cache_scope
from envloop.environments.docker.build_settings import BuildNetwork
from envloop.environments.docker.cli import (
    DockerError,
    DockerUnavailableError,
    docker_binary,
    first_line,
)
from envloop.environments.docker.engine import image_id
from envloop.environments.docker.image_owners import TASK_LABEL, foreign_images, foreign_reason
from envloop.environments.docker.prepare import NeededImage, PreparedDockerfile
from envloop.environments.docker.records import BuildRecords, tail
from envloop.environments.docker.references import normalized
from envloop.environments.docker.uv_images import make_uv_image, uv_requirement


@dataclass
class BuildAttempt:
    ok: bool
    reason: str | None
    """One line saying why the build failed."""
    notes: list[str]


@dataclass(frozen=True)
class BuildTarget:
    """What to build and where its output goes."""

    context: Path
    dockerfile: Path
    """The task's own Dockerfile inside `context` (a prepared copy is built when it differs)."""
    image: str
    key: str
    digest: str
    build_args: Mapping[str, str] = field(default_factory=dict)
    """`--build-arg` values (a compose service's `build.args`)."""


BUILD_LOG_HEAD_BYTES = 4 << 20
BUILD_LOG_TAIL_BYTES = 4 << 20
"""What a build's log keeps of the builder's output, written as it arrives: its first and last
4 MiB, with a line counting what was dropped between. BuildKit clips one step's output at 2 MiB,
but a Dockerfile of many stages runs many steps, each with 2 MiB of its own: a task could otherwise
fill the host's disk through its build log."""
_DRAIN_SECONDS = 10.0
"""How long the rest of the output may take to arrive once the builder has ended."""
_COMMAND_CHARS = 80
_FAILED_STEP = re.compile(r"^(#\d+) ERROR: executor failed running \[(.*)\](.*)$")
_CAUSE = re.compile(r"could not resolve|not found|no such|denied|unable to|error", re.IGNORECASE)
_TIMING = re.compile(r"^[\d\s:.%-]*")
"""A step's output line starts with its time; curl's progress meter may run into the message."""


def failure_reason(log: str) -> str:
    """The builder's own summary of what failed (its last error line), on one line: a failed
    `RUN` names its command's start and the first line of its output that says why."""
    lines = [line.strip() for line in log.replace("\r", " ").split("\n") if line.strip()]
    failed = next((m for m in map(_FAILED_STEP.match, reversed(lines)) if m is not None), None)
    if failed is not None:
        step, command, rest = failed.groups()
        command = command.removeprefix("/bin/sh -c ")
        shown = command if len(command) <= _COMMAND_CHARS else command[:_COMMAND_CHARS] + "…"
        said = [_TIMING.sub("", text[len(step) :]) for text in lines if text.startswith(step + " ")]
        cause = next((text for text in said if _CAUSE.search(text) and "ERROR:" not in text), None)
        return f"RUN {shown} failed{rest}" + (f" ({cause[:200]})" if cause else "")
    for line in reversed(lines):
        lowered = line.lower()
        if (
            lowered.startswith(("error", "failed to solve", "executor failed"))
            or "did not complete" in lowered
        ):
            return line[:400]
    return first_line(log)


def _log_line(log_path: Path, message: str) -> None:
    with log_path.open("a", encoding="utf-8") as log:
        log.write(f"envloop: {message}\n")


async def _run_build(
    target: BuildTarget, dockerfile: Path, network: BuildNetwork, log_path: Path, timeout: float
) -> tuple[bool, str | None]:
    """(succeeded, reason if not): `docker build` with its output added to `log_path`, bounded
    while it is written (`BUILD_LOG_HEAD_BYTES`, `BUILD_LOG_TAIL_BYTES`)."""
    args = [docker_binary(), "build", "--progress", "plain", "--label", f"{TASK_LABEL}={target.digest}",
            "-t", target.image, "-f", str(dockerfile)]  # fmt: skip
    if network != "default":
        args += ["--network", network]
    for name, value in target.build_args.items():
        args += ["--build-arg", f"{name}={value}"]
    args.append(str(target.context))
    with log_path.open("ab") as log:
        writer = BoundedWriter(log, head=BUILD_LOG_HEAD_BYTES, tail=BUILD_LOG_TAIL_BYTES)
        read_end, write_end = os.pipe()
        pump = PipePump(read_end, writer)
        try:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *args,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=write_end,
                    stderr=asyncio.subprocess.STDOUT,
                    env={**os.environ, "DOCKER_BUILDKIT": "1"},
                )
            finally:
                os.close(write_end)
            if not await _wait(proc, timeout):
                return False, f"the build did not finish within {timeout:g} s"
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_DRAIN_SECONDS):
                    await pump.ended
        finally:
            pump.close()
            writer.finish()
    if proc.returncode == 0:
        return True, None
    return False, failure_reason(tail(log_path, 64 * 1024))


async def _wait(proc: asyncio.subprocess.Process, timeout: float) -> bool:
    """Whether `proc` ended within `timeout`; killed when it did not, or when cancelled."""
    try:
        async with asyncio.timeout(timeout):
            await proc.wait()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return False
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(proc.wait())
        raise
    return True


async def _make_uv(needed: NeededImage, records: BuildRecords, log_path: Path) -> str | None:
    """Make one of uv's images the build needs; a note naming the wheel, or None when another
    build made it meanwhile."""
    async with records.lock(f"uv:{uv_requirement(needed.image)}"):
        if await image_id(needed.image) is not None:
            return None
        wheel = await asyncio.to_thread(make_uv_image, needed.image, lambda line: _log_line(log_path, line))
    return f"{needed.image} made from {wheel}"


async def build_prepared(
    target: BuildTarget,
    plan: PreparedDockerfile,
    network: BuildNetwork,
    records: BuildRecords,
    timeout: float,
) -> BuildAttempt:
    """Build `plan` as `target.image`. A build that cannot succeed here (an image neither present
    nor makeable) fails before the builder runs; an unreachable daemon raises DockerUnavailableError."""
    log_path = records.log_path(target.key)
    notes = [note for note in (plan.frontend_note(),) if note is not None]
    notes += [substitution.describe() for substitution in plan.substitutions]
    log_path.write_text("".join(f"envloop: {note}\n" for note in notes))
    present = await asyncio.to_thread(present_images)
    if present is None:
        raise DockerUnavailableError("no Docker daemon answers")
    missing = missing_images(plan, present)
    if missing:
        refusal = missing[0].describe() + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
        _log_line(log_path, refusal)
        return BuildAttempt(False, refusal, notes)
    foreign = await foreign_images([needed.image for needed in plan.needed], {target.digest})
    if foreign:
        kind = next(needed.kind for needed in plan.needed if needed.image == foreign[0])
        refusal = foreign_reason(f"{kind} {foreign[0]}")
        _log_line(log_path, refusal)
        return BuildAttempt(False, refusal, notes)
    for needed in plan.needed:
        if normalized(needed.image) in present:
            continue
        try:
            made = await _make_uv(needed, records, log_path)
        except DockerError as exc:
            failure = f"{needed.kind} {needed.image}: could not be made from uv's wheel ({exc})"
            _log_line(log_path, failure)
            return BuildAttempt(False, failure, notes)
        notes += [made] if made is not None else []
    dockerfile = target.dockerfile
    text = plan.scoped_text(cache_scope(target.digest))
    if text != plan.text:
        notes.append(
            f"cache mounts kept apart from other images' (their ids under {cache_scope(target.digest)}/)"
        )
        _log_line(log_path, notes[-1])
    if plan.changed or text != plan.text:
        dockerfile = records.dockerfile_path(target.key)
        dockerfile.write_text(text)
    ok, reason = await _run_build(target, dockerfile, network, log_path, timeout)
    if not ok and plan.builtin_frontend is not None:
        version = plan.builtin_frontend.partition("@")[0].rpartition(":")[2]
        reason = (
            f"{reason} (built by the daemon's built-in frontend in place of docker/dockerfile {version}, "
            "which may lack a feature the Dockerfile uses)"
        )
    return BuildAttempt(ok, reason, notes)
