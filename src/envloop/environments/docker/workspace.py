"""Snapshots of a container's working directory, for trajectories.

Where the worker sees the container's filesystem (root beside the daemon, overlay2: its merged
directory), the snapshot is read from there like a local one, never following the container's
links, in milliseconds; otherwise it is taken through exec:

A listing (`find -printf`: type, size, modification time, path, link target) comes out in one
exec; only the files that are new or whose size or time changed since the previous snapshot are
read again: short ones (up to `TEXT_LIMIT`) as one tar stream, whose content gives their digest and
text, longer ones by `sha256sum` inside the container. The same bounds as the local walk hold
(`FILE_LIMIT` files, tool caches skipped), plus a cap on the bytes one snapshot copies out; a file
past that cap is recorded by its digest only. Links are recorded, never followed.

The commands are the image's own (GNU find, tar and sha256sum, as Debian and Ubuntu images have);
where they are missing, the snapshot is empty and says so once.
"""

import asyncio
import contextlib
import hashlib
import secrets
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from envloop.environments.docker.containers import Container
from envloop.environments.docker.host_files import HostFiles, Unreachable
from envloop.environments.docker.transfer import DEFAULT_MAX_BYTES
from envloop.trajectories.workspace import (
    FILE_LIMIT,
    SKIPPED_DIRS,
    TEXT_LIMIT,
    FileState,
    Snapshot,
    content_state,
    is_racy,
    link_state,
    snapshot_at,
)

PRIVATE_DIR = "/.envloop"
"""A directory of the worker's inside every container (root's, mode 0700), made at setup."""
COPY_LIMIT = 64 << 20
"""Bytes of short files one snapshot copies out of the container at most."""
SNAPSHOT_TIMEOUT_SEC = 120.0
ARGS_LIMIT = 64 << 10
"""Bytes of file names a command takes as arguments at most (far below the kernel's bounds)."""

_PRUNED = " -o ".join(f"-name {name}" for name in sorted(SKIPPED_DIRS))
LIST_SCRIPT = (
    'cd -- "$1" 2>/dev/null || exit 0; '
    f"find . -xdev -mindepth 1 \\( -type d \\( {_PRUNED} \\) -prune \\) -o "
    "\\( \\( -type f -o -type l \\) -printf '%y %s %T@ %P\\0%l\\0' \\)"
)


def _mtime_ns(text: str) -> int:
    seconds, _, fraction = text.partition(".")
    return int(seconds) * 1_000_000_000 + int((fraction + "000000000")[:9])


def parse_listing(data: bytes) -> list[tuple[str, str, int, int, str]]:
    """(path, kind f|l, size, mtime_ns, link target) per entry of LIST_SCRIPT's output, by path."""
    fields = data.split(b"\0")
    entries = []
    for header, target in zip(fields[0::2], fields[1::2], strict=False):
        parts = header.decode("utf-8", errors="surrogateescape").split(" ", 3)
        if len(parts) != 4 or parts[0] not in ("f", "l") or not parts[1].isdigit():
            continue
        try:
            mtime = _mtime_ns(parts[2])
        except ValueError:
            continue
        link = target.decode("utf-8", errors="replace")
        entries.append((parts[3], parts[0], int(parts[1]), mtime, link))
    entries.sort()
    return entries[:FILE_LIMIT]


class ContainerSnapshots:
    """Snapshots of one container's working directory."""

    def __init__(self, container: Container, workdir: str) -> None:
        self.container = container
        self.workdir = workdir
        self.problem: str | None = None
        """Why snapshots are empty (the image lacks the tools), once known."""

    async def take(self, previous: Snapshot | None = None) -> Snapshot:
        files = await self.container.host_files()
        if files is not None and files.covers(self.workdir):
            found = await asyncio.to_thread(_on_host, files, self.workdir, previous)
            if found is not None:
                return dict(sorted(found.items()))
        if self.problem is not None:
            return {}
        earlier = previous or {}
        taken = time.time_ns()
        with tempfile.TemporaryDirectory(prefix="envloop-snapshot-") as scratch:
            listing = Path(scratch) / "listing"
            result = await self.container.exec(
                ["sh", "-c", LIST_SCRIPT, "snapshot", self.workdir],
                user="0",
                timeout=SNAPSHOT_TIMEOUT_SEC,
                stdout=listing,
            )
            if result.exit_code != 0:
                why = result.stderr.strip()[-200:] or f"exit code {result.exit_code}"
                self.problem = f"no file changes recorded: the working directory could not be listed ({why})"
                return {}
            states: Snapshot = {}
            short: list[tuple[str, int, int]] = []
            long: list[tuple[str, int, int]] = []
            budget = COPY_LIMIT
            for path, kind, size, mtime, link in parse_listing(listing.read_bytes()):
                known = earlier.get(path)
                if known is not None and not known.racy and (known.size, known.mtime_ns) == (size, mtime):
                    states[path] = known
                elif kind == "l":
                    states[path] = link_state(link, mtime)
                elif size <= TEXT_LIMIT and size <= budget:
                    budget -= size
                    short.append((path, size, mtime))
                else:
                    long.append((path, size, mtime))
            fresh = await self._read_short(short, Path(scratch)) | await self._hash_long(long, Path(scratch))
        for path, state in fresh.items():
            states[path] = replace(state, racy=True) if is_racy(state.mtime_ns, taken) else state
        return dict(sorted(states.items()))

    async def _read_short(self, files: Sequence[tuple[str, int, int]], scratch: Path) -> dict[str, FileState]:
        """Short files' states from one tar stream of them (a file that vanished meanwhile is left out)."""
        if not files:
            return {}
        archive = scratch / "short.tar"
        await self.container.exec(
            await self._over_names(
                files,
                'tar --ignore-failed-read -cf - --no-recursion -- "$@"',
                'tar -C "$1" --ignore-failed-read -cf - --null --no-recursion -T "$2"; rm -f -- "$2"',
            ),
            user="0",
            timeout=SNAPSHOT_TIMEOUT_SEC,
            stdout=archive,
        )
        times = {path: mtime for path, _, mtime in files}
        states: dict[str, FileState] = {}
        with contextlib.suppress(tarfile.TarError, EOFError, OSError), tarfile.open(archive, "r|") as tar:
            for info in tar:
                if not info.isreg() or info.name not in times or info.size > TEXT_LIMIT:
                    continue
                source = tar.extractfile(info)
                data = source.read() if source is not None else b""
                digest = hashlib.sha256(data).hexdigest()
                states[info.name] = content_state(len(data), times[info.name], digest, data)
        return states

    async def _over_names(
        self, files: Sequence[tuple[str, int, int]], on_args: str, on_list: str
    ) -> list[str]:
        """The command running a script over the files' names: `on_args` takes them as its
        arguments, in the working directory, which costs no copy in; past `ARGS_LIMIT` bytes (or
        with a name that is not UTF-8, which the API cannot carry), `on_list` reads them from the
        NUL-separated file `$2` in the container's private directory (root's alone, so a running
        command cannot swap it), `$1` being the working directory."""
        names = [name for name, _, _ in files]
        encoded = [name.encode("utf-8", errors="surrogateescape") for name in names]
        if sum(len(name) + 1 for name in encoded) <= ARGS_LIMIT and all(map(_is_utf8, names)):
            return ["sh", "-c", f'cd -- "$1" || exit 1; shift; {on_args}', "snapshot", self.workdir, *names]
        path = f"{PRIVATE_DIR}/list-{secrets.token_hex(6)}"
        await self.container.put_file(path, b"".join(name + b"\0" for name in encoded), mode=0o600)
        return ["sh", "-c", on_list, "snapshot", self.workdir, path]

    async def _hash_long(self, files: Sequence[tuple[str, int, int]], scratch: Path) -> dict[str, FileState]:
        """Long files' digests, computed inside (their content never leaves the container)."""
        if not files:
            return {}
        sums = scratch / "sums"
        await self.container.exec(
            await self._over_names(
                files, 'sha256sum -z -- "$@"', 'cd -- "$1" && xargs -0 sha256sum -z -- < "$2"; rm -f -- "$2"'
            ),
            user="0",
            timeout=SNAPSHOT_TIMEOUT_SEC,
            stdout=sums,
        )
        known = {path: (size, mtime) for path, size, mtime in files}
        states: dict[str, FileState] = {}
        for line in sums.read_bytes()[:DEFAULT_MAX_BYTES].split(b"\0"):
            digest, _, name = line.partition(b"  ")
            path = name.decode("utf-8", errors="surrogateescape")
            if path in known and len(digest) == 64:
                size, mtime = known[path]
                states[path] = FileState(size, mtime, "sha256:" + digest.decode(), None, binary=False)
        return states


def _on_host(files: HostFiles, workdir: str, previous: Snapshot | None) -> Snapshot | None:
    """The snapshot read from the container's filesystem as the host sees it, where every link is
    the container's: the working directory is reached one name at a time without following one,
    and the walk below it holds each directory by its descriptor (snapshot_at). None when the
    working directory's path goes through a link (the caller reads it from inside instead)."""
    try:
        with files.directory(workdir) as directory:
            return snapshot_at(directory, previous)
    except FileNotFoundError:
        return {}
    except (Unreachable, OSError):
        return None


def _is_utf8(name: str) -> bool:
    """Whether a listed name was UTF-8 (one that was not holds surrogates, parse_listing's escape)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


__all__ = ["ContainerSnapshots", "parse_listing"]
