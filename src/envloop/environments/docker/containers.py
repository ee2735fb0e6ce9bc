"""One container per trial: started from the task's image, used through exec and tar copies, removed.

The container's first process is `docker-init` (tini) over `sleep infinity`, so it stays up between
commands and reaps whatever they leave. Nothing of the host is mounted; files cross as tar streams
(`put_dir`, `put_file`, `get_dir`, `read_file`). Its network is `none` unless the caller names
another network of its own; `host` (which would let the trial reach every service listening on
the host) is refused. Limits are the daemon's cgroups: `--cpus`, `--memory` (no swap beyond it),
`--pids-limit`, plus a largest-file rlimit.

Every container carries labels naming its trial and the worker process that owns it (see
`orphans`, which removes the containers of workers that are gone); `running_container` removes its
container on every path out, cancellation included.
"""

import asyncio
import contextlib
import functools
import os
import re
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, Field, field_validator

from envloop.environments.docker import transfer
from envloop.environments.docker.cli import DockerError, docker, docker_binary, first_line
from envloop.environments.docker.orphans import (
    MANAGED_LABEL,
    TRIAL_LABEL,
    WORKER_LABEL,
    remove_container,
    worker_identity,
)
from envloop.environments.docker.transfer import CopyOutReport, Owner
from envloop.environments.procs import read_tail
from envloop.environments.shielded import finish_even_if_cancelled

EXEC_MARKER = "ENVLOOP_EXEC_ID"
_KILL_WAIT_SEC = 10.0
_NETWORK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class ContainerSpec(BaseModel):
    """How to start a trial's container. Values of `env` never appear on a command line."""

    image: str
    trial_id: str
    network: str = "none"
    cpus: float | None = Field(default=None, gt=0)
    memory_mb: int | None = Field(default=None, gt=0)
    pids: int | None = Field(default=None, gt=0)
    file_size_mb: int | None = Field(default=None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None
    user: str | None = None
    """Default user of every exec (the image's USER when None)."""
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("network")
    @classmethod
    def _own_network_namespace(cls, value: str) -> str:
        """`host` and `container:<id>` would share another namespace's network, and with it every
        service listening there (the host's own included): a trial never gets either."""
        if value == "host" or value.startswith("container:") or not _NETWORK_NAME.fullmatch(value):
            raise ValueError(f"network {value!r}: a trial gets `none` or a named network of its own")
        return value


class ExecOutcome(BaseModel):
    """How one command ended. `exit_code` is None when it was killed on timeout."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_sec: float
    stdout_whole: bool
    stderr_whole: bool
    """True when `stdout`/`stderr` hold the whole output, not only its last 64 KiB."""


def _name_for(trial_id: str) -> str:
    safe = re.sub(r"[^a-zA-Z0-9_.-]", "-", trial_id)[:80] or "trial"
    return f"envloop-{safe}-{secrets.token_hex(3)}"


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _env_args(names: Sequence[str]) -> list[str]:
    """`-e NAME` per variable: the client takes each value from its own environment. A name with
    `=` (from a hostile task.toml) would put a value on the command line, so it is refused."""
    for name in names:
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a valid environment variable name")
    return [arg for name in names for arg in ("-e", name)]


class Container:
    """A started trial container. Create with `start` (or `running_container`), end with `remove`."""

    def __init__(self, container_id: str, name: str, spec: ContainerSpec) -> None:
        self.id = container_id
        self.name = name
        self.spec = spec
        self._stopped = False
        self._removed = False

    @classmethod
    async def start(cls, spec: ContainerSpec) -> "Container":
        name = _name_for(spec.trial_id)
        labels = {
            **spec.labels,
            MANAGED_LABEL: "1",
            TRIAL_LABEL: spec.trial_id,
            WORKER_LABEL: worker_identity(),
        }
        args = ["run", "--detach", "--init", "--name", name, "--hostname", "envloop"]
        args += ["--network", spec.network]
        for key, value in labels.items():
            args += ["--label", f"{key}={value}"]
        if spec.cpus is not None:
            args += ["--cpus", f"{spec.cpus:g}"]
        if spec.memory_mb is not None:
            args += ["--memory", f"{spec.memory_mb}m", "--memory-swap", f"{spec.memory_mb}m"]
        if spec.pids is not None:
            args += ["--pids-limit", str(spec.pids)]
        args += ["--ulimit", "core=0"]
        if spec.file_size_mb is not None:
            size = spec.file_size_mb * 1024 * 1024
            args += ["--ulimit", f"fsize={size}:{size}"]
        if spec.workdir:
            args += ["--workdir", spec.workdir]
        args += _env_args(list(spec.env))
        args += ["--entrypoint", "sleep", spec.image, "infinity"]
        try:
            result = await docker(args, env=spec.env, timeout=120)
        except BaseException:
            # `docker run` may have created the container before failing or being cancelled.
            await finish_even_if_cancelled(remove_container(name))
            raise
        return cls(result.stdout.decode().strip(), name, spec)

    async def exec(
        self,
        command: Sequence[str],
        *,
        user: str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
        stdout_path: Path | None = None,
        stderr_path: Path | None = None,
    ) -> ExecOutcome:
        """Run `command` inside; on timeout or cancellation kill every process it started.

        Output streams to the given files (or temporary ones); the outcome keeps the last 64 KiB of
        each. A stopped container is started again first (its files are as they were).
        """
        if self._removed:
            raise DockerError(f"container of trial {self.spec.trial_id} was removed")
        if self._stopped:
            await docker(["start", self.id])
            self._stopped = False
        token = secrets.token_hex(8)
        extra = {**(env or {}), EXEC_MARKER: token}
        args = ["exec"]
        if stdin is not None:
            args.append("--interactive")
        chosen_user = user or self.spec.user
        if chosen_user:
            args += ["--user", chosen_user]
        if cwd:
            args += ["--workdir", cwd]
        args += _env_args(list(extra))
        args += [self.id, *command]
        started = time.monotonic()
        with contextlib.ExitStack() as files:
            out = files.enter_context(
                stdout_path.open("w+b") if stdout_path else tempfile.TemporaryFile()  # noqa: SIM115
            )
            err = files.enter_context(
                stderr_path.open("w+b") if stderr_path else tempfile.TemporaryFile()  # noqa: SIM115
            )
            proc = await asyncio.create_subprocess_exec(
                docker_binary(),
                *args,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env={**os.environ, **extra},
            )
            timed_out = await self._wait(proc, token, timeout, stdin)
            stdout, stdout_whole = read_tail(out)
            stderr, stderr_whole = read_tail(err)
        return ExecOutcome(
            exit_code=None if timed_out else proc.returncode,
            stdout=stdout,
            stderr=stderr,
            timed_out=timed_out,
            duration_sec=time.monotonic() - started,
            stdout_whole=stdout_whole,
            stderr_whole=stderr_whole,
        )

    async def _wait(
        self, proc: asyncio.subprocess.Process, token: str, timeout: float | None, stdin: bytes | None
    ) -> bool:
        try:
            async with asyncio.timeout(timeout):
                await proc.communicate(stdin)
        except TimeoutError:
            await self._kill_exec(proc, token)
            return True
        except BaseException:
            await finish_even_if_cancelled(self._kill_exec(proc, token))
            raise
        return False

    async def _kill_exec(self, proc: asyncio.subprocess.Process, token: str) -> None:
        """Killing the `docker exec` client leaves the command running inside, so the processes
        carrying this exec's marker are killed in the container too (as root)."""
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        script = (
            'for d in /proc/[0-9]*; do p="${d#/proc/}"; [ "$p" = "$$" ] && continue; '
            f'if tr "\\0" "\\n" < "$d/environ" 2>/dev/null | grep -qx "{EXEC_MARKER}={token}"; '
            'then kill -9 "$p" 2>/dev/null; fi; done; true'
        )
        with contextlib.suppress(DockerError, TimeoutError):
            await docker(["exec", "--user", "0", self.id, "/bin/sh", "-c", script], timeout=_KILL_WAIT_SEC)

    async def put_dir(
        self, source: Path, dest: str, *, owner: Owner | None = None, readable: bool = False
    ) -> None:
        """Copy the host directory (or file) `source` to the absolute path `dest` inside.

        The parent of `dest` is created when missing. Symlinks are copied as links, never followed;
        `readable` makes every file readable by every user inside.
        """
        parent, top = _split(dest)
        with tempfile.TemporaryFile() as archive:
            pack = functools.partial(transfer.pack_tree, readable=readable)
            await asyncio.to_thread(pack, source, top, archive, owner or Owner())
            archive.seek(0)
            await self._extract_into(parent, archive, keep_owner=owner is not None and owner != Owner())

    async def put_file(
        self, dest: str, data: bytes, *, mode: int = 0o644, owner: Owner | None = None
    ) -> None:
        """Write `data` as the file `dest` inside (replacing it), creating its parent when missing."""
        parent, top = _split(dest)
        with tempfile.TemporaryFile() as archive:
            archive.write(transfer.pack_bytes(data, top, mode, owner or Owner()))
            archive.seek(0)
            await self._extract_into(parent, archive, keep_owner=owner is not None and owner != Owner())

    async def _extract_into(self, parent: str, archive: BinaryIO, *, keep_owner: bool) -> None:
        """Unpack the tar stream `archive` under `parent`. Files owned by root need no archive mode
        (a plain copy makes them root's); archive mode, which keeps another owner, makes the daemon
        look the image's USER up on the host, and fails for a user only the image has."""
        mode = ["--archive"] if keep_owner else []
        for attempt in range(2):
            archive.seek(0)
            proc = await asyncio.create_subprocess_exec(
                docker_binary(),
                "cp",
                *mode,
                "-",
                f"{self.id}:{parent}",
                stdin=archive,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            _, stderr = await proc.communicate()
            if proc.returncode == 0:
                return
            message = stderr.decode(errors="replace")
            if attempt == 0 and ("Could not find the file" in message or "must be a directory" in message):
                await self.exec(["mkdir", "-p", parent], user="0")
                continue
            raise DockerError(f"copy into {parent}: {first_line(message)}")

    async def get_dir(
        self,
        source: str,
        dest: Path,
        *,
        max_bytes: int = transfer.DEFAULT_MAX_BYTES,
        max_entries: int = transfer.DEFAULT_MAX_ENTRIES,
    ) -> CopyOutReport:
        """Copy the directory `source` inside to the new host directory `dest`: regular files and
        directories only, within the caps; everything else is listed in the report's `skipped`."""
        with tempfile.TemporaryFile() as archive:
            complete = await self._copy_out(source, archive, max_bytes)
            archive.seek(0)
            report = await asyncio.to_thread(
                transfer.unpack_tree, archive, dest, max_bytes=max_bytes, max_entries=max_entries
            )
        if not complete:
            report.skipped.append(f"the copy was cut off past the {max_bytes}-byte cap: the rest is not kept")
        return report

    async def read_file(self, path: str, *, max_bytes: int = 16 << 20) -> bytes:
        """The content of the regular file `path` inside (FileNotFoundError when it is absent)."""
        with tempfile.TemporaryFile() as archive:
            await self._copy_out(path, archive, max_bytes)
            archive.seek(0)
            return await asyncio.to_thread(transfer.read_single_file, archive, max_bytes)

    async def _copy_out(self, source: str, archive: BinaryIO, max_bytes: int) -> bool:
        """`docker cp` the path's tar into `archive`, stopping once it outgrows the cap (plus room
        for tar headers) so a huge file cannot fill the host's disk; False when it was cut off."""
        limit = max_bytes + (64 << 20)
        proc = await asyncio.create_subprocess_exec(
            docker_binary(),
            "cp",
            f"{self.id}:{source}",
            "-",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stderr is not None
        written = 0
        try:
            while chunk := await proc.stdout.read(1 << 20):
                written += len(chunk)
                if written > limit:
                    proc.kill()
                    break
                archive.write(chunk)
            stderr = await proc.stderr.read()
            await proc.wait()
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await finish_even_if_cancelled(proc.wait())
            raise
        if proc.returncode != 0 and written <= limit:
            message = stderr.decode(errors="replace")
            if "Could not find the file" in message or "No such container:path" in message:
                raise FileNotFoundError(f"{source}: no such file or directory in the container")
            raise DockerError(f"copy out of {source}: {first_line(message)}")
        return written <= limit

    async def stop(self) -> None:
        """Kill every process inside at once (the container's first process included); its files
        stay, so they can still be copied out. A later `exec` starts it again."""
        if self._removed or self._stopped:
            return
        result = await docker(["kill", self.id], check=False)
        if result.returncode != 0 and "is not running" not in result.stderr:
            raise DockerError(f"docker kill: {first_line(result.stderr)}")
        self._stopped = True

    async def remove(self) -> None:
        """Remove the container and everything in it (idempotent); finishes even when cancelled."""
        if self._removed:
            return
        await finish_even_if_cancelled(remove_container(self.id))
        self._removed = True


def _split(dest: str) -> tuple[str, str]:
    if not dest.startswith("/") or "\0" in dest:
        raise ValueError(f"{dest!r}: expected an absolute path inside the container")
    normal = os.path.normpath(dest)
    parent, top = os.path.split(normal)
    if not top:
        raise ValueError(f"{dest!r}: cannot replace the container's root")
    return parent, top


@contextlib.asynccontextmanager
async def running_container(spec: ContainerSpec) -> AsyncIterator[Container]:
    """A started container, removed on every way out (error, timeout, cancellation)."""
    container = await Container.start(spec)
    try:
        yield container
    finally:
        await container.remove()
