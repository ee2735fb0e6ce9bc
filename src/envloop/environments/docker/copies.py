"""Files into and out of a trial's container: by the host where it sees the container's files
(host_files.py, about a millisecond each), else as tar streams through the Engine API (50 to 100 ms
each: the daemon starts a helper process per archive).

The two ways give the same results: owners and modes as asked, links copied in as links and never
followed or copied out, only directories and regular files coming out, within the same caps. The
host's way is taken for a path only while the container runs, its storage is overlay2 read by a
root worker beside the daemon, and nothing on the path is a mount of the container's own or a link
to resolve; anything else goes through the API, which resolves it inside the container.
"""

import asyncio
import base64
import functools
import json
import os
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO, TypeVar

from envloop.environments.base import PathKind
from envloop.environments.docker import transfer
from envloop.environments.docker.cli import DockerError
from envloop.environments.docker.engine import NotFoundError, engine
from envloop.environments.docker.host_files import HostFiles, Unreachable
from envloop.environments.docker.transfer import CopyOutReport, Owner

_GO_MODE_DIR = 1 << 31
_GO_MODE_SPECIAL = (1 << 27) | (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19)
"""Go's FileMode bits for a link, device, pipe, socket, character device or irregular file."""

T = TypeVar("T")


class ContainerCopies(ABC):
    """The copies of a container (`Container` is one): what it must give is its ID, a root
    command, and where the host sees its files."""

    id: str

    @abstractmethod
    async def root(self, script: str, *args: str, timeout: float = 120.0) -> None:
        """Run `script` as root inside; DockerError when it fails."""

    @abstractmethod
    async def host_files(self) -> HostFiles | None:
        """The container's files as the host sees them now, or None."""

    async def _on_host(self, paths: Sequence[str], work: Callable[[HostFiles], T]) -> tuple[bool, T | None]:
        """(True, result) when `work` ran on the host's view of every path; (False, None) when the
        API must do it instead (nothing was changed then)."""
        files = await self.host_files()
        if files is None or not all(files.covers(path) for path in paths):
            return False, None
        try:
            return True, await asyncio.to_thread(work, files)
        except Unreachable:
            return False, None
        except FileNotFoundError:
            raise FileNotFoundError(f"{paths[0]}: no such file or directory in the container") from None
        except IsADirectoryError:
            raise
        except OSError as exc:  # its message names no host path: only the reason
            raise DockerError(f"{paths[0]}: {exc.strerror or type(exc).__name__}") from None

    # -- in -----------------------------------------------------------------------------------------

    async def put_dir(
        self, source: Path, dest: str, *, owner: Owner | None = None, readable: bool = False
    ) -> None:
        """Copy the host directory (or file) `source` to the absolute path `dest` inside, over
        what is there (directories merge, anything else is replaced).

        The parent of `dest` is created when missing. Symlinks are copied as links, never followed;
        `readable` makes every file readable by every user inside.
        """
        parent, top = _split(dest)
        owner = owner or Owner()
        work = functools.partial(HostFiles.put_tree, source=source, dest=dest, owner=owner, readable=readable)
        if (await self._on_host([dest], work))[0]:
            return
        with tempfile.TemporaryFile() as archive:
            pack = functools.partial(transfer.pack_tree, readable=readable)
            await asyncio.to_thread(pack, source, top, archive, owner)
            await self._extract_into(parent, archive)

    async def put_file(
        self, dest: str, data: bytes, *, mode: int = 0o644, owner: Owner | None = None
    ) -> None:
        """Write `data` as the file `dest` inside (replacing it), creating its parent when missing."""
        parent, top = _split(dest)
        owner = owner or Owner()
        work = functools.partial(HostFiles.write_file, path=dest, data=data, mode=mode, owner=owner)
        if (await self._on_host([dest], work))[0]:
            return
        with tempfile.TemporaryFile() as archive:
            archive.write(transfer.pack_bytes(data, top, mode, owner))
            await self._extract_into(parent, archive)

    async def make_directories(self, directories: list[tuple[str, int]]) -> None:
        """Create the absolute `directories` (parents as needed) with their modes, owned by root;
        through the API, in one archive upload."""
        for path, _ in directories:
            _split(path)
        work = functools.partial(HostFiles.make_directories, directories=directories, owner=Owner())
        if (await self._on_host([path for path, _ in directories], work))[0]:
            return
        with tempfile.TemporaryFile() as archive:
            archive.write(transfer.pack_directories([(path.lstrip("/"), mode) for path, mode in directories]))
            await self._extract_into("/", archive)

    async def reset(self, remove: Sequence[str], make: Sequence[tuple[str, int]] = ()) -> None:
        """Remove each of `remove` (with everything below), then make each of `make` a new empty
        directory with its mode, owned by root. Through the API, one root command does it all, and
        none runs when nothing is there to remove or make (a command costs a tenth of a second)."""
        paths = [*remove, *(path for path, _ in make)]
        for path in paths:
            _split(path)
        if (await self._on_host(paths, functools.partial(_reset, remove=remove, make=make)))[0]:
            return
        if await self._reset_resolved(remove, make):
            return
        if not make:
            kinds = await asyncio.gather(*(self.path_kind(path) for path in remove))
            if all(kind is None for kind in kinds):
                return
        script = ['rm -rf -- "$@"']
        for index, (_, mode) in enumerate(make, start=len(remove) + 1):
            script.append(f'mkdir -p -- "${{{index}}}" && chmod {mode:o} -- "${{{index}}}"')
        await self.root(" && ".join(script), *remove, *(path for path, _ in make))

    async def _reset_resolved(self, remove: Sequence[str], make: Sequence[tuple[str, int]]) -> bool:
        """`reset` on the host through paths whose links (an agent's `/logs -> /srv/x`) are
        resolved as the container resolves them, so no program of the container (which a root
        agent may have replaced) runs for it; False when the host cannot see the container or a
        resolved path is under a mount of its own (a VOLUME of the image's): the caller runs the
        root command then. A path whose links loop or lead to the container's root is refused:
        DockerError."""
        files = await self.host_files()
        if files is None:
            return False
        asked = [*remove, *(path for path, _ in make)]
        try:
            resolved_remove = [await asyncio.to_thread(files.resolve, path) for path in remove]
            resolved_make = [(await asyncio.to_thread(files.resolve, path), mode) for path, mode in make]
        except Unreachable:
            raise DockerError(f"{asked[0]}: its links loop") from None
        except OSError:
            return False
        paths = [*resolved_remove, *(path for path, _ in resolved_make)]
        work = functools.partial(_reset, remove=resolved_remove, make=resolved_make)
        if "/" in paths:
            raise DockerError(f"{asked[0]}: its links lead to the container's root")
        return (await self._on_host(paths, work))[0]

    async def _extract_into(self, parent: str, archive: BinaryIO) -> None:
        """Unpack the tar stream `archive` under `parent` (created when missing, by an archive of
        empty directories: no program of the container runs). Owners are the archive's numeric
        ones: a user only the image has needs no lookup on the host."""
        for attempt in range(2):
            archive.seek(0)
            try:
                await engine().put_archive(self.id, parent, archive)
                return
            except NotFoundError:
                if attempt:
                    raise
                await self._make_parent(parent)

    async def _make_parent(self, parent: str) -> None:
        """Make the missing directories of `parent`, root's and 0755: only those, since unpacking
        an archive over an existing directory would reset its mode (`/tmp` to 0755)."""
        names = [name for name in parent.split("/") if name not in ("", ".")]
        present = 0
        while present < len(names) and await self.path_kind("/" + "/".join(names[: present + 1])):
            present += 1
        directories = [("/".join(names[: end + 1]), 0o755) for end in range(present, len(names))]
        with tempfile.TemporaryFile() as made:
            made.write(transfer.pack_directories(directories))
            made.seek(0)
            await engine().put_archive(self.id, "/", made)

    # -- out ----------------------------------------------------------------------------------------

    async def get_dir(
        self,
        source: str,
        dest: Path,
        *,
        max_bytes: int = transfer.DEFAULT_MAX_BYTES,
        max_entries: int = transfer.DEFAULT_MAX_ENTRIES,
    ) -> CopyOutReport:
        """Copy the directory `source` inside to the new host directory `dest`: regular files and
        directories only, within the caps; everything else is listed in the report's `skipped`.
        FileNotFoundError when nothing is at `source`."""
        work = functools.partial(
            HostFiles.copy_out, path=source, dest=dest, max_bytes=max_bytes, max_entries=max_entries
        )
        done, report = await self._on_host([source], work)
        if done and report is not None:
            return report
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
        """The content of the regular file `path` inside: FileNotFoundError when it is absent,
        IsADirectoryError when it is not a regular file, ValueError past `max_bytes`."""
        work = functools.partial(HostFiles.read_file, path=path, max_bytes=max_bytes)
        done, data = await self._on_host([path], work)
        if done and data is not None:
            return data
        with tempfile.TemporaryFile() as archive:
            await self._copy_out(path, archive, max_bytes)
            archive.seek(0)
            return await asyncio.to_thread(transfer.read_single_file, archive, max_bytes)

    async def export(self, source: str, archive: BinaryIO, max_bytes: int) -> bool:
        """The daemon's tar of `source` (links in its path resolved inside the container, no
        program of the container run) into `archive`, cut off past about `max_bytes`: False when
        it was. FileNotFoundError when nothing is at `source`."""
        return await self._copy_out(source, archive, max_bytes)

    async def _copy_out(self, source: str, archive: BinaryIO, max_bytes: int) -> bool:
        """The path's tar into `archive`, stopping once it outgrows the cap (plus room for tar
        headers) so a huge file cannot fill the host's disk; False when it was cut off."""
        limit = max_bytes + (64 << 20)
        written = 0
        try:
            async with engine().stream(
                "GET", f"/containers/{self.id}/archive", params={"path": source}
            ) as response:
                async for chunk in response.aiter_bytes(1 << 20):
                    written += len(chunk)
                    if written > limit:
                        return False
                    archive.write(chunk)
        except NotFoundError:
            raise FileNotFoundError(f"{source}: no such file or directory in the container") from None
        return True

    async def path_kind(self, path: str) -> PathKind | None:
        """What `path` is, never following a link at its end (a link counts as `other`)."""
        done, kind = await self._on_host([path], functools.partial(HostFiles.kind, path=path))
        if done:
            return kind
        try:
            response = await engine().request("HEAD", f"/containers/{self.id}/archive", params={"path": path})
        except NotFoundError:
            return None
        header = response.headers.get("X-Docker-Container-Path-Stat", "")
        try:
            found = json.loads(base64.b64decode(header))
        except ValueError:
            return "other"
        mode = int(found.get("mode", 0))
        if found.get("linkTarget") or mode & _GO_MODE_SPECIAL:
            return "other"
        return "directory" if mode & _GO_MODE_DIR else "file"


def _reset(files: HostFiles, remove: Sequence[str], make: Sequence[tuple[str, int]]) -> None:
    for path in [*remove, *(path for path, _ in make)]:
        files.remove(path)
    files.make_directories(list(make), Owner())


def _split(dest: str) -> tuple[str, str]:
    if not dest.startswith("/") or "\0" in dest:
        raise ValueError(f"{dest!r}: expected an absolute path inside the container")
    normal = os.path.normpath(dest)
    parent, top = os.path.split(normal)
    if not top:
        raise ValueError(f"{dest!r}: cannot replace the container's root")
    return parent, top


__all__ = ["ContainerCopies", "PathKind"]
