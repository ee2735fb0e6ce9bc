"""One container of a trial: started from an image, used through exec and tar copies, removed.

The container's first process is `docker-init` (tini) over the image's ENTRYPOINT and `sleep
infinity`, so it stays up between commands and reaps whatever they leave. Nothing of the host is
mounted; files cross as copies (`put_dir`, `put_file`, `get_dir`, `read_file`: copies.py). What it
starts with (its network, its limits, its bounded log) is container_spec.py's.

Every container carries labels naming its trial and the worker process that owns it (see
`orphans`, which removes the containers of workers that are gone); `running_container` removes its
container on every path out, cancellation included. Everything goes through the Engine API
(engine.py): no command-line process per call.
"""

import asyncio
import contextlib
import os
import re
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from envloop.environments.capture import BoundedWriter, Capture
from envloop.environments.docker import layer_changes, leftovers
from envloop.environments.docker.cli import DockerError
from envloop.environments.docker.container_spec import ContainerSpec, check_variable_names, create_body
from envloop.environments.docker.copies import ContainerCopies
from envloop.environments.docker.engine import NotFoundError, demultiplex, engine
from envloop.environments.docker.host_files import HostFiles
from envloop.environments.docker.orphans import (
    MANAGED_LABEL,
    TRIAL_LABEL,
    WORKER_LABEL,
    remove_container,
)
from envloop.environments.shielded import finish_even_if_cancelled
from envloop.liveness import process_identity

EXEC_MARKER = "ENVLOOP_EXEC_ID"
_KILL_WAIT_SEC = 10.0
_EXIT_WAIT_SEC = 60.0
"""How long `stop` waits for the daemon to record a killed container's exit (it gives up on a
lost exit event after the container's stop timeout, 10 s by default)."""


class ExecOutcome(BaseModel):
    """How one command ended. `exit_code` is None when it was killed on timeout."""

    exit_code: int | None
    timed_out: bool
    stdout: str = ""
    stderr: str = ""
    stdout_whole: bool = True
    stderr_whole: bool = True
    """True when `stdout`/`stderr` hold the whole output, not only its last 64 KiB."""


Output = BoundedWriter | Path | None
"""Where a command's output goes: a bounded writer of the caller's, a file to create, or a temporary
file (both bounded the same way: environments/capture.py)."""


def _output(files: contextlib.ExitStack, target: Output) -> BoundedWriter:
    if isinstance(target, BoundedWriter):
        return target
    capture = Capture(target)
    files.callback(capture.close)
    return BoundedWriter(capture)


def _name_for(trial_id: str) -> str:
    safe = re.sub(r"[^a-zA-Z0-9_.-]", "-", trial_id)[:80] or "trial"
    return f"envloop-{safe}-{secrets.token_hex(3)}"


class Container(ContainerCopies):
    """A started trial container. Create with `start` (or `running_container`), end with `remove`."""

    def __init__(self, container_id: str, name: str, spec: ContainerSpec) -> None:
        self.id = container_id
        self.name = name
        self.spec = spec
        self._stopped = False
        self._removed = False
        self._layers: layer_changes.Layers | Literal[False] | None = None
        """Where the host sees its files; False when it cannot; None until known."""
        self._layers_read = asyncio.Lock()
        """Held while they are read, so copies started together ask the daemon once."""

    @classmethod
    async def start(cls, spec: ContainerSpec) -> "Container":
        name = spec.name or _name_for(spec.trial_id)
        labels = {
            **spec.labels,
            MANAGED_LABEL: "1",
            TRIAL_LABEL: spec.trial_id,
            WORKER_LABEL: process_identity(),
        }
        api = engine()
        try:
            created = await api.json(
                "POST", "/containers/create", params={"name": name}, body=create_body(spec, labels)
            )
            await api.request("POST", f"/containers/{created['Id']}/start")
        except BaseException:
            # The container may exist before failing or being cancelled.
            await finish_even_if_cancelled(remove_container(name))
            raise
        return cls(str(created["Id"]), name, spec)

    async def exec(
        self,
        command: Sequence[str],
        *,
        user: str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdout: Output = None,
        stderr: Output = None,
    ) -> ExecOutcome:
        """Run `command` inside, its output written to the two files as it comes, bounded while it
        is written (the outcome keeps the last 64 KiB of each); on timeout or cancellation kill
        every process it started. A stopped container is started again first (its files are as
        they were)."""
        if self._removed:
            raise DockerError(f"container of trial {self.spec.trial_id} was removed")
        api = engine()
        await self.resume()
        token = secrets.token_hex(8)
        variables = {**(env or {}), EXEC_MARKER: token}
        check_variable_names(variables)
        body: dict[str, object] = {
            "Cmd": list(command),
            "AttachStdout": True,
            "AttachStderr": True,
            "Env": [f"{name}={value}" for name, value in variables.items()],
        }
        chosen_user = user or self.spec.user
        if chosen_user:
            body["User"] = chosen_user
        if cwd:
            body["WorkingDir"] = cwd
        created = await api.json("POST", f"/containers/{self.id}/exec", body=body)
        exec_id = str(created["Id"])
        with contextlib.ExitStack() as files:
            out, err = _output(files, stdout), _output(files, stderr)
            timed_out = False
            try:
                async with asyncio.timeout(timeout):
                    async with api.stream(
                        "POST", f"/exec/{exec_id}/start", body={"Detach": False, "Tty": False}
                    ) as response:
                        await demultiplex(response, out, err)
            except TimeoutError:
                await self._kill_exec(token)
                timed_out = True
            except BaseException:
                await finish_even_if_cancelled(self._kill_exec(token))
                raise
            finally:
                out.finish()
                err.finish()
            code = None if timed_out else (await api.json("GET", f"/exec/{exec_id}/json")).get("ExitCode")
            (out_tail, out_whole), (err_tail, err_whole) = out.tail(), err.tail()
        return ExecOutcome(
            exit_code=int(code) if code is not None else None,
            timed_out=timed_out,
            stdout=out_tail,
            stderr=err_tail,
            stdout_whole=out_whole,
            stderr_whole=err_whole,
        )

    async def _kill_exec(self, token: str) -> None:
        """An exec cannot be killed through the API: the processes carrying its marker are
        killed, which also ends the stream. All are stopped before any is killed, and again until
        none is left: killed one by one, a shell whose `sleep` died first would run its next
        command before its own turn came. From the host where the worker sees the container's
        processes (no program of the container runs for it: a root agent may have replaced
        `sh`), else inside, as root."""
        with contextlib.suppress(DockerError, OSError):
            if await leftovers.kill_marked(self.id, f"{EXEC_MARKER}={token}"):
                return
        script = (
            'marked() { for d in /proc/[0-9]*; do p="${d#/proc/}"; [ "$p" = "$$" ] && continue; '
            f'tr "\\0" "\\n" < "$d/environ" 2>/dev/null | grep -qx "{EXEC_MARKER}={token}" && echo "$p"; '
            "done; }; "
            'while pids="$(marked)"; [ -n "$pids" ]; do kill -STOP $pids 2>/dev/null; '
            "kill -KILL $pids $(marked) 2>/dev/null; done; true"
        )
        with contextlib.suppress(DockerError, TimeoutError, ValueError):
            await self.exec(["/bin/sh", "-c", script], user="0", timeout=_KILL_WAIT_SEC)

    async def root(self, script: str, *args: str, timeout: float = 120.0) -> None:
        """A setup step of the worker's own, as root inside; DockerError with its stderr if it fails."""
        outcome = await self.exec(["sh", "-c", script, "envloop", *args], user="0", timeout=timeout)
        if outcome.exit_code != 0:
            why = outcome.stderr.strip()[-300:] or f"exit code {outcome.exit_code}"
            raise DockerError(f"setting up the container failed: {why}")

    async def changes(self) -> layer_changes.Signatures:
        """The container's filesystem changes from its image, path -> its state: two readings of
        the same container compare (layer_changes.py), readings of different containers do not."""
        layers = await self._layer_dirs()
        if layers is None:
            return await layer_changes.read_daemon_diff(self.id)
        return await layer_changes.read_upper(layers.upper)

    async def host_files(self) -> HostFiles | None:
        """Its files as the host sees them, while it runs (see `host_root`), or None."""
        root = await self.host_root()
        layers = await self._layer_dirs()
        return None if root is None or layers is None else HostFiles(root, layers.mounts)

    async def host_root(self) -> Path | None:
        """The container's filesystem as this process sees it (overlay2's merged directory, root
        beside the daemon) while it is running, else None. Whoever reads it must never follow a
        link in it: the links are the container's, and on the host they lead to the host's files."""
        layers = await self._layer_dirs()
        if layers is None or self._stopped or self._removed:
            return None
        return layers.merged if await asyncio.to_thread(os.path.ismount, layers.merged) else None

    async def _layer_dirs(self) -> layer_changes.Layers | None:
        async with self._layers_read:
            if self._layers is None:
                self._layers = await layer_changes.layer_dirs(self.id) or False
        return self._layers or None

    async def networks(self) -> list[str]:
        """The names of the networks the container is attached to now."""
        return list(await self._endpoints())

    async def address(self, network: str) -> str:
        """The container's IPv4 address on `network` (attached to it), NotFoundError otherwise."""
        address = str((await self._endpoints()).get(network, {}).get("IPAddress") or "")
        if not address:
            raise NotFoundError(f"the container has no address on network {network}")
        return address

    async def _endpoints(self) -> dict[str, dict[str, object]]:
        inspected = await engine().json("GET", f"/containers/{self.id}/json")
        return dict((inspected.get("NetworkSettings") or {}).get("Networks") or {})

    async def resume(self) -> None:
        """Start the container again if `stop` killed it (its files are as they were)."""
        if self._stopped:
            await engine().request("POST", f"/containers/{self.id}/start")
            self._stopped = False

    @property
    def stopped(self) -> bool:
        """Whether the container is stopped (a later `exec` starts it again)."""
        return self._stopped

    async def stop(self) -> None:
        """Kill every process inside; its files stay, so they can still be copied out. Where it
        can, the container stays up with only its own processes (leftovers.py); otherwise it is
        killed whole, and a later `exec` starts it again."""
        if self._removed or self._stopped or await leftovers.end_leftovers(self.id):
            return
        api = engine()
        try:
            await api.request("POST", f"/containers/{self.id}/kill")
        except DockerError as exc:
            if "is not running" not in str(exc):
                raise
        # A container whose first process just died (an agent ended the keep-up command) may
        # still be running to the daemon, whose kill then returns before the exit is recorded;
        # a `start` then would be a no-op and the next exec would find the container stopped.
        await api.request(
            "POST", f"/containers/{self.id}/wait", params={"condition": "not-running"}, timeout=_EXIT_WAIT_SEC
        )
        self._stopped = True

    async def remove(self) -> None:
        """Remove the container and everything in it (idempotent); finishes even when cancelled."""
        if self._removed:
            return
        await finish_even_if_cancelled(remove_container(self.id))
        self._removed = True


@contextlib.asynccontextmanager
async def running_container(spec: ContainerSpec) -> AsyncIterator[Container]:
    """A started container, removed on every way out (error, timeout, cancellation)."""
    container = await Container.start(spec)
    try:
        yield container
    finally:
        await container.remove()
