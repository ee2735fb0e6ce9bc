"""Talking to the Docker daemon through its own command-line client.

The CLI rather than the Docker SDK for Python: the SDK builds only with the legacy builder (no
BuildKit, so no `COPY --chmod` or `RUN --mount`, which task Dockerfiles use), it is synchronous
where every caller here is async, and `docker build`, `exec` and `cp` already stream exactly what
we need to files or pipes. One subprocess per operation costs a few
milliseconds next to what the daemon does for it.

Which client: `ENVLOOP_DOCKER` names it; otherwise Debian's `/usr/bin/docker` (from the same
package as the daemon, with BuildKit built in) when present, else `docker` on PATH.
"""

import asyncio
import contextlib
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel

from envloop.settings import settings

_DEBIAN_CLIENT = Path("/usr/bin/docker")
_CAPTURE_LIMIT = 1 << 20


class DockerError(RuntimeError):
    """A docker command failed; the message is the daemon's own first line, without host paths."""


class DockerUnavailableError(DockerError):
    """No client, or no daemon answering it."""


class CommandResult(BaseModel):
    returncode: int
    stdout: bytes
    stderr: str


def docker_binary() -> str:
    chosen = settings().docker
    if chosen:
        return chosen
    if _DEBIAN_CLIENT.is_file() and os.access(_DEBIAN_CLIENT, os.X_OK):
        return str(_DEBIAN_CLIENT)
    found = shutil.which("docker")
    if found is None:
        raise DockerUnavailableError("the docker client is not installed (scripts/setup installs it)")
    return found


def first_line(text: str) -> str:
    """The most telling line of a docker error: its last non-empty line, trimmed to one line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else "no output")[:400]


async def docker(
    args: Sequence[str],
    *,
    input_bytes: bytes | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 120.0,
    check: bool = True,
) -> CommandResult:
    """Run `docker ARGS` to completion with captured (bounded) output.

    `env` is added to the client's own environment: `docker exec -e NAME` and `docker run -e NAME`
    read values from there, which keeps them off the command line (visible to every host user).
    """
    proc = await asyncio.create_subprocess_exec(
        docker_binary(),
        *args,
        stdin=asyncio.subprocess.PIPE if input_bytes is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **env} if env else None,
    )
    try:
        async with asyncio.timeout(timeout):
            stdout, stderr = await proc.communicate(input_bytes)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(proc.wait())
        raise
    result = CommandResult(
        returncode=proc.returncode if proc.returncode is not None else -1,
        stdout=stdout[:_CAPTURE_LIMIT],
        stderr=stderr[:_CAPTURE_LIMIT].decode("utf-8", errors="replace"),
    )
    if result.returncode != 0 and "Cannot connect to the Docker daemon" in result.stderr:
        raise DockerUnavailableError("no Docker daemon answers")
    if check and result.returncode != 0:
        raise DockerError(f"docker {args[0]}: {first_line(result.stderr)}")
    return result


async def daemon_version() -> str:
    """The daemon's version; raises DockerUnavailableError when no daemon answers."""
    try:
        result = await docker(["version", "--format", "{{.Server.Version}}"], timeout=15, check=False)
    except (FileNotFoundError, PermissionError, TimeoutError):
        raise DockerUnavailableError("no Docker daemon answers") from None
    version = result.stdout.decode().strip()
    if result.returncode != 0 or not version:
        raise DockerUnavailableError("no Docker daemon answers")
    return version
