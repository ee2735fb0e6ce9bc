"""A task's image, built from its `environment/` directory once per task digest and then reused.

The image is tagged `envloop/task:<digest hex>`, so a task whose content is unchanged never builds
twice and a cache hit costs one `docker image inspect`. Each build leaves a record beside the task
archives in the artifact store (`builds/<hex>.json`: status, one-line reason, duration, the log's
tail) and its whole output (`builds/<hex>.log`). Workers that need the same image at once take a
file lock per digest, so only one of them builds it.

The build's network comes from ENVLOOP_DOCKER_BUILD_NETWORK: `default` (the daemon's), `host`
(needed for RUN steps that install packages on a daemon without a bridge, as on these machines;
such steps can then also reach services listening on the host) or `none`. Unset, it is `default`
on a daemon with a bridge and `none` on one without.
"""

import asyncio
import contextlib
import fcntl
import math
import os
import re
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from envloop.environments.docker.base_images import honoured_images
from envloop.environments.docker.cli import docker, docker_binary, first_line, image_id
from envloop.environments.docker.from_lines import base_images
from envloop.tasks.harbor import load_task_config
from envloop.tasks.model import TaskFormatError

BUILD_NETWORK_VARIABLE = "ENVLOOP_DOCKER_BUILD_NETWORK"
BUILD_TIMEOUT_VARIABLE = "ENVLOOP_DOCKER_BUILD_TIMEOUT_SEC"
IMAGE_REPOSITORY = "envloop/task"
TASK_LABEL = "envloop.task-digest"
DEFAULT_BUILD_TIMEOUT_SEC = 1800.0
LOG_TAIL_BYTES = 4096
_LOCK_POLL_SEC = 0.2

BuildNetwork = Literal["default", "host", "none"]
BuildStatus = Literal["built", "cached", "failed"]


class BuildConfigError(ValueError):
    """An operator setting for builds is not valid; the message names it."""


def build_network(value: str | None = None) -> BuildNetwork | None:
    """The network chosen for image builds: `value`, else ENVLOOP_DOCKER_BUILD_NETWORK; None when
    neither says (see `effective_build_network`)."""
    source = "build network " if value is not None else f"{BUILD_NETWORK_VARIABLE}="
    chosen = value if value is not None else os.environ.get(BUILD_NETWORK_VARIABLE) or None
    if chosen is None:
        return None
    if chosen not in ("default", "host", "none"):
        raise BuildConfigError(f"{source}{chosen!r}: expected default, host or none")
    return chosen  # type: ignore[return-value]


async def effective_build_network(value: str | None = None) -> BuildNetwork:
    """The chosen network, or when none was chosen the daemon's default where it has a bridge and
    `none` where it has not: a daemon started with `--bridge=none` fails every RUN step of a
    `default` build ("network bridge not found"), while `none` still runs those that need no
    network, and the ones that do fail naming their command."""
    chosen = build_network(value)
    if chosen is not None:
        return chosen
    has_bridge = await docker(["network", "inspect", "bridge"], check=False)
    return "default" if has_bridge.returncode == 0 else "none"


def build_timeout() -> float:
    raw = os.environ.get(BUILD_TIMEOUT_VARIABLE)
    if not raw:
        return DEFAULT_BUILD_TIMEOUT_SEC
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise BuildConfigError(f"{BUILD_TIMEOUT_VARIABLE}={raw!r}: expected a positive number of seconds")
    return value


def _hex(digest: str) -> str:
    return digest.split(":", 1)[-1]


def task_image(digest: str) -> str:
    """The image name of a task with this content digest."""
    return f"{IMAGE_REPOSITORY}:{_hex(digest)}"


class BuildRecord(BaseModel):
    """The last build of one task digest, as kept in `builds/<hex>.json`."""

    digest: str
    image: str
    status: Literal["built", "failed"]
    reason: str | None = None
    """One line saying why a build failed."""
    image_id: str | None = None
    network: BuildNetwork
    started_at: datetime
    duration_sec: float
    log_tail: str = ""


class BuildOutcome(BaseModel):
    """What `ensure_task_image` did for one task."""

    digest: str
    image: str
    status: BuildStatus
    cache_hit: bool
    duration_sec: float
    reason: str | None = None
    image_id: str | None = None


class BuildRecords:
    """Build records and logs under `<artifacts>/builds`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def record_path(self, digest: str) -> Path:
        return self.root / f"{_hex(digest)}.json"

    def log_path(self, digest: str) -> Path:
        return self.root / f"{_hex(digest)}.log"

    def read(self, digest: str) -> BuildRecord | None:
        try:
            return BuildRecord.model_validate_json(self.record_path(digest).read_bytes())
        except (OSError, ValueError):
            return None

    def write(self, record: BuildRecord) -> None:
        target = self.record_path(record.digest)
        partial = target.with_name(f".{target.name}.{os.getpid()}.part")
        partial.write_text(record.model_dump_json(indent=2))
        partial.replace(target)

    @contextlib.asynccontextmanager
    async def lock(self, digest: str) -> AsyncIterator[None]:
        """Hold the digest's build lock (across processes); waiting never blocks the event loop."""
        fd = os.open(self.root / f"{_hex(digest)}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    await asyncio.sleep(_LOCK_POLL_SEC)
            yield
        finally:
            os.close(fd)


class BuildSettings(BaseModel):
    """What a task's `[environment]` says about its image (Harbor's fields)."""

    build_timeout_sec: float | None = None
    """How long the build may take; capped by ENVLOOP_DOCKER_BUILD_TIMEOUT_SEC."""
    docker_image: str | None = None
    """A prebuilt image to use instead of building the Dockerfile (it must be on this machine)."""
    dockerfile: str = "Dockerfile"
    """The Dockerfile's path in the build context (a compose service's `build.dockerfile`)."""
    build_args: dict[str, str] = Field(default_factory=dict)
    """`--build-arg` values (a compose service's `build.args`)."""
    problem: str | None = None
    """Why the fields cannot be used, when they are malformed."""


_IMAGE_REFERENCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")


def read_build_settings(task_root: Path) -> BuildSettings:
    """The task's `[environment] build_timeout_sec` and `docker_image`, checked (they are kept as
    unknown fields of task.toml, so nothing validated them at push)."""
    try:
        section = load_task_config(task_root / "task.toml").environment
    except TaskFormatError:
        return BuildSettings(problem="task.toml: not a valid task configuration")
    timeout = getattr(section, "build_timeout_sec", None)
    image = getattr(section, "docker_image", None)
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf
    ):
        return BuildSettings(
            problem=f"task.toml: [environment] build_timeout_sec = {timeout!r}: expected seconds > 0"
        )
    if image is not None and (not isinstance(image, str) or not _IMAGE_REFERENCE.fullmatch(image)):
        return BuildSettings(problem=f"task.toml: [environment] docker_image = {image!r}: not an image name")
    return BuildSettings(build_timeout_sec=timeout, docker_image=image or None)


def _tail(path: Path, limit: int = LOG_TAIL_BYTES) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


async def _absent(images: list[str]) -> list[str]:
    return [name for name in images if await image_id(name) is None]


def _failure_reason(log: str) -> str:
    """The builder's own summary of what failed (its last error line), on one line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in reversed(lines):
        lowered = line.lower()
        if (
            lowered.startswith(("error", "failed to solve", "executor failed"))
            or "did not complete" in lowered
        ):
            return line[:400]
    return first_line(log)


async def _run_build(
    context: Path,
    image: str,
    digest: str,
    network: BuildNetwork,
    log_path: Path,
    timeout: float,
    settings: BuildSettings,
) -> tuple[bool, str | None]:
    """(succeeded, reason if not): `docker build` with its whole output in `log_path`."""
    args = [docker_binary(), "build", "--progress", "plain", "--label", f"{TASK_LABEL}={digest}", "-t", image]
    if network != "default":
        args += ["--network", network]
    if settings.dockerfile != "Dockerfile":
        args += ["--file", str(context / settings.dockerfile)]
    for name, value in settings.build_args.items():
        args += ["--build-arg", f"{name}={value}"]
    args.append(str(context))
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "DOCKER_BUILDKIT": "1"},
        )
        try:
            async with asyncio.timeout(timeout):
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return False, f"the build did not finish within {timeout:g} s"
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(proc.wait())
            raise
    if proc.returncode == 0:
        return True, None
    return False, _failure_reason(_tail(log_path, 64 * 1024))


async def ensure_task_image(
    environment_dir: Path,
    digest: str,
    records: BuildRecords,
    *,
    network: BuildNetwork | None = None,
    force: bool = False,
    settings: BuildSettings | None = None,
) -> BuildOutcome:
    """The task's image, built from `environment_dir` unless an image of this digest exists.

    `settings` carries the task's own build fields (see `read_build_settings`): a prebuilt
    `docker_image` is used instead of the Dockerfile when it is on this machine (and named as the
    reason of a failure when it is not), and `build_timeout_sec` shortens the operator's timeout.

    Never raises for a task's own fault (no Dockerfile, a base image that is not here, a failing
    RUN step, a timeout): those come back as a `failed` outcome with a one-line reason, and are
    recorded. Docker itself being unreachable raises DockerUnavailableError.
    """
    image = task_image(digest)
    started = time.monotonic()
    if not force and (found := await image_id(image)) is not None:
        return BuildOutcome(
            digest=digest,
            image=image,
            status="cached",
            cache_hit=True,
            duration_sec=time.monotonic() - started,
            image_id=found,
        )
    chosen = await effective_build_network(network)
    async with records.lock(digest):
        # Another worker may have built it while this one waited for the lock.
        if not force and (found := await image_id(image)) is not None:
            return BuildOutcome(
                digest=digest,
                image=image,
                status="cached",
                cache_hit=True,
                duration_sec=time.monotonic() - started,
                image_id=found,
            )
        started_at = datetime.now(UTC)
        ok, reason = await _build(
            environment_dir, image, digest, chosen, records, settings or BuildSettings()
        )
        built_id = await image_id(image) if ok else None
        record = BuildRecord(
            digest=digest,
            image=image,
            status="built" if ok else "failed",
            reason=reason,
            image_id=built_id,
            network=chosen,
            started_at=started_at,
            duration_sec=round(time.monotonic() - started, 3),
            log_tail=_tail(records.log_path(digest)),
        )
        records.write(record)
    return BuildOutcome(
        digest=digest,
        image=image,
        status=record.status,
        cache_hit=False,
        duration_sec=record.duration_sec,
        reason=reason,
        image_id=built_id,
    )


async def _build(
    environment_dir: Path,
    image: str,
    digest: str,
    network: BuildNetwork,
    records: BuildRecords,
    settings: BuildSettings,
) -> tuple[bool, str | None]:
    log_path = records.log_path(digest)
    if settings.problem is not None:
        log_path.write_text(settings.problem + "\n")
        return False, settings.problem
    if settings.docker_image is not None:
        return await _use_prebuilt(settings.docker_image, image, log_path)
    dockerfile = environment_dir / settings.dockerfile
    if not dockerfile.is_file():
        log_path.write_text("environment/Dockerfile: missing\n")
        return (
            False,
            "environment/Dockerfile: missing (the docker environment builds the task's image from it)",
        )
    needed, _ = base_images(dockerfile.read_text(errors="replace"))
    absent = await _absent(needed)
    if absent:
        available = [name for name in honoured_images() if name not in absent and await image_id(name)]
        listed = ", ".join(available) or "none: see scripts/docker-base-images"
        reason = (
            f"FROM {absent[0]}: base image not available on this machine "
            f"(nothing can be pulled; available: {listed})"
        )
        log_path.write_text(reason + "\n")
        return False, reason
    timeout = min(build_timeout(), settings.build_timeout_sec or math.inf)
    return await _run_build(environment_dir, image, digest, network, log_path, timeout, settings)


async def _use_prebuilt(prebuilt: str, image: str, log_path: Path) -> tuple[bool, str | None]:
    """Tag the task's prebuilt image as its image; nothing can be pulled, so it must be here."""
    if await image_id(prebuilt) is None:
        reason = f"docker_image {prebuilt}: not available on this machine (nothing can be pulled)"
        log_path.write_text(reason + "\n")
        return False, reason
    await docker(["tag", prebuilt, image])
    log_path.write_text(f"the task's docker_image {prebuilt}, tagged as {image}\n")
    return True, None
