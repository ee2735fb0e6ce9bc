"""A running container's files, read and written from the host where the worker sees them.

With overlay2 and a worker running as root beside the daemon, the container's filesystem is
mounted on the host (its merged directory). A copy through the Engine API costs 50 to 100 ms (the
daemon starts a helper process for each archive); the same copy done here costs about a
millisecond, and a trial makes a dozen of them. Everything in that tree is the container's,
written by a hostile agent, and its links lead to the host's own files when followed here, so:

- a path is walked one name at a time from a descriptor of the container's root, and no name is
  ever followed as a link (`O_NOFOLLOW` at every step, each directory held by its descriptor): a
  link, or a directory swapped for one meanwhile, cannot lead out of the container's tree;
- a file is read only once a descriptor that opens nothing (`O_PATH`) shows a regular file, so a
  device node or a FIFO the agent made is never opened by the host;
- files are created anew (`O_EXCL`) and owned as asked; trees are removed descriptor by descriptor
  (`shutil.rmtree` with `dir_fd`);
- a path the container sees through a mount of its own (a volume, `/etc/hosts`, `/proc`) is not
  in that tree, and a path whose directories go through a link is the container's to resolve:
  both go through the API instead (`Unreachable`, `HostFiles.covers`).

The semantics are those of the API's archive copies (copies.py, transfer.py), so a caller
cannot tell which way a copy went.
"""

import contextlib
import os
import shutil
import stat
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from envloop.core.posix_paths import overlap
from envloop.environments.docker.transfer import CopyOutReport, Owner
from envloop.trajectories.workspace import open_regular

RUNTIME_MOUNTS = ("/proc", "/sys", "/dev", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf")
"""What the runtime mounts in every container without listing it among the container's mounts."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20
_DEPTH_LIMIT = 256
"""Directories a tree copied in may nest (deeper is refused: each level holds a descriptor)."""
_LINK_HOPS = 40
"""Links `resolve` follows at most, as the kernel does (ELOOP past it)."""


class Unreachable(Exception):
    """The path cannot be reached from the host as the container sees it: the API must be used."""


def _names(path: str) -> list[str]:
    if not path.startswith("/") or "\0" in path:
        raise Unreachable(path)
    names = [name for name in path.split("/") if name not in ("", ".")]
    if ".." in names:
        raise Unreachable(path)
    return names


@dataclass(frozen=True)
class HostFiles:
    """The files of one running container, through its merged directory `root`."""

    root: Path
    mounts: tuple[str, ...]
    """Where the container has mounts of its own (its volumes and binds)."""

    def covers(self, path: str) -> bool:
        """Whether `path` and everything below it are in the container's own filesystem tree."""
        normal = "/" + "/".join(_names(path))
        return not any(overlap(normal, mount) for mount in (*self.mounts, *RUNTIME_MOUNTS))

    def directory(self, path: str) -> contextlib.AbstractContextManager[int]:
        """A descriptor of the directory `path`, reached without following a link: FileNotFoundError
        when it is missing, Unreachable when a name on the way is a link or not a directory."""
        return self._directory(_names(path))

    @contextlib.contextmanager
    def _directory(self, names: list[str], *, create: bool = False) -> Iterator[int]:
        """A descriptor of the directory `names` below the root (made, root's and 0755, where
        missing when `create`). FileNotFoundError when it is missing; Unreachable when a name on
        the way is a link or not a directory."""
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for name in names:
                inner = _enter(fd, name, create=create)
                os.close(fd)
                fd = inner
            yield fd
        finally:
            os.close(fd)

    @staticmethod
    def _parent(path: str) -> tuple[list[str], str]:
        names = _names(path)
        if not names:
            raise Unreachable(path)  # the root itself is never replaced or copied
        return names[:-1], names[-1]

    def resolve(self, path: str) -> str:
        """`path` as the container resolves it, as a path without links: each link on the way (not
        its last name) is read and followed as the container would follow it (an absolute target
        from its root, `..` never above it), one name at a time from the root's descriptor, so the
        walk never leaves the container's tree. Unreachable past `_LINK_HOPS` links (a loop)."""
        done: list[str] = []
        todo = [name for name in reversed(path.split("/")) if name not in ("", ".")]
        hops = 0
        while todo:
            name = todo.pop()
            if name == "..":
                if done:
                    done.pop()
                continue
            if not todo:
                done.append(name)
                break
            try:
                with self._directory(done) as fd:
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    target = os.readlink(name, dir_fd=fd) if stat.S_ISLNK(info.st_mode) else None
            except (FileNotFoundError, Unreachable):
                target = None  # what is missing (or made a file meanwhile) resolves to itself
            if target is None:
                done.append(name)
                continue
            hops += 1
            if hops > _LINK_HOPS:
                raise Unreachable(path)
            if target.startswith("/"):
                done = []
            todo.extend(part for part in reversed(target.split("/")) if part not in ("", "."))
        return "/" + "/".join(done)

    # -- reading ------------------------------------------------------------------------------------

    def kind(self, path: str) -> Literal["file", "directory", "other"] | None:
        """What `path` is, a link counting as `other` (as the API's stat says)."""
        parents, name = self._parent(path)
        try:
            with self._directory(parents) as fd:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if stat.S_ISDIR(info.st_mode):
            return "directory"
        return "file" if stat.S_ISREG(info.st_mode) else "other"

    def read_file(self, path: str, max_bytes: int) -> bytes:
        """The regular file's content: FileNotFoundError when nothing is there, IsADirectoryError
        when it is not a regular file, ValueError past `max_bytes`."""
        parents, name = self._parent(path)
        with self._directory(parents) as fd:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            handle = open_regular(fd, name)
        if handle is None:
            raise IsADirectoryError(f"{name}: not a regular file ({_describe(info)})")
        with handle:
            data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise ValueError(f"{name}: over the {max_bytes}-byte cap")
        return data

    def copy_out(self, path: str, dest: Path, *, max_bytes: int, max_entries: int) -> CopyOutReport:
        """Copy the directory `path` to the new host directory `dest`: directories and regular
        files only, within the caps, one note per entry left out (as `transfer.unpack_tree`).
        FileNotFoundError when nothing is at `path`; a link or a file there copies nothing."""
        parents, name = self._parent(path)
        with self._directory(parents) as fd:
            os.stat(name, dir_fd=fd, follow_symlinks=False)  # FileNotFoundError first
            try:
                top = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                top = None
        dest.mkdir(parents=True, exist_ok=False)
        report = CopyOutReport()
        if top is not None:
            _CopyOut(report, max_bytes, max_entries).tree(top, dest)
        return report

    # -- writing ------------------------------------------------------------------------------------

    def remove(self, path: str) -> None:
        """Remove `path` and everything below it (nothing when it is missing)."""
        parents, name = self._parent(path)
        try:
            with self._directory(parents) as fd:
                _remove_entry(fd, name)
        except FileNotFoundError:
            return

    def make_directories(self, directories: list[tuple[str, int]], owner: Owner) -> None:
        """Each directory with its mode (parents made as needed), replacing a non-directory."""
        for path, mode in directories:
            parents, name = self._parent(path)
            with self._directory(parents, create=True) as fd:
                os.close(_directory_entry(fd, name, mode, owner))

    def write_file(self, path: str, data: bytes, mode: int, owner: Owner) -> None:
        """`data` as the new file `path` (whatever was there goes first, parents made as needed)."""
        parents, name = self._parent(path)
        with self._directory(parents, create=True) as fd:
            _remove_entry(fd, name)
            out = os.open(name, _NEW_FILE_FLAGS, 0o600, dir_fd=fd)
            with os.fdopen(out, "wb") as handle:
                os.fchown(out, owner.uid, owner.gid)
                os.fchmod(out, mode)
                handle.write(data)

    def put_tree(self, source: Path, dest: str, owner: Owner, *, readable: bool) -> None:
        """Copy the host's `source` (a directory or a file) to `dest`, over what is there as an
        archive would be unpacked: directories merge, anything else is replaced. Links are copied
        as links, never followed on either side; FIFOs, sockets and devices are left out.
        `readable` lets every user read each file and enter each directory."""
        parents, name = self._parent(dest)
        with self._directory(parents, create=True) as fd:
            _PutTree(owner, readable).entry(Path(source), fd, name, depth=0)


def _enter(directory: int, name: str, *, create: bool) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=directory)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as exc:  # a link (ELOOP) or a file (ENOTDIR) on the way
        raise Unreachable(name) from exc
    with contextlib.suppress(FileExistsError):  # made meanwhile: opened below like any other
        os.mkdir(name, 0o700, dir_fd=directory)
    made = os.open(name, _DIR_FLAGS, dir_fd=directory)
    os.fchown(made, 0, 0)
    os.fchmod(made, 0o755)
    return made


def _remove_entry(directory: int, name: str) -> None:
    try:
        info = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(name, dir_fd=directory)
    else:
        os.unlink(name, dir_fd=directory)


def _directory_entry(directory: int, name: str, mode: int, owner: Owner) -> int:
    """The directory `name` (made, or kept when it is one already), owned and moded as asked."""
    try:
        info = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=directory)
        info = None
    if info is None:
        os.mkdir(name, 0o700, dir_fd=directory)
    made = os.open(name, _DIR_FLAGS, dir_fd=directory)
    os.fchown(made, owner.uid, owner.gid)
    os.fchmod(made, mode)
    return made


def _describe(info: os.stat_result) -> str:
    if stat.S_ISDIR(info.st_mode):
        return "a directory"
    if stat.S_ISLNK(info.st_mode):
        return "symlink"
    if stat.S_ISFIFO(info.st_mode):
        return "FIFO"
    if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode):
        return "device file"
    return "special entry"


@dataclass
class _PutTree:
    owner: Owner
    readable: bool

    def entry(self, source: Path, directory: int, name: str, depth: int) -> None:
        info = source.lstat()
        times = (info.st_atime_ns, info.st_mtime_ns)
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISDIR(info.st_mode):
            if depth > _DEPTH_LIMIT:
                raise OSError(f"{source}: directories nested deeper than {_DEPTH_LIMIT}")
            inner = _directory_entry(directory, name, mode | (0o555 if self.readable else 0), self.owner)
            try:
                with os.scandir(source) as listing:
                    children = sorted(entry.name for entry in listing)
                for child in children:
                    self.entry(source / child, inner, child, depth + 1)
                os.utime(inner, ns=times)
            finally:
                os.close(inner)
        elif stat.S_ISREG(info.st_mode):
            _remove_entry(directory, name)
            with os.fdopen(os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as src:
                out = os.open(name, _NEW_FILE_FLAGS, 0o600, dir_fd=directory)
                with os.fdopen(out, "wb") as handle:
                    os.fchown(out, self.owner.uid, self.owner.gid)
                    os.fchmod(out, mode | (0o444 if self.readable else 0))
                    shutil.copyfileobj(src, handle, _CHUNK)
                    handle.flush()
                    os.utime(out, ns=times)
        elif stat.S_ISLNK(info.st_mode):
            _remove_entry(directory, name)
            os.symlink(source.readlink(), name, dir_fd=directory)
            os.chown(name, self.owner.uid, self.owner.gid, dir_fd=directory, follow_symlinks=False)
            os.utime(name, ns=times, dir_fd=directory, follow_symlinks=False)


@dataclass
class _CopyOut:
    report: CopyOutReport
    max_bytes: int
    max_entries: int
    entries: int = 1
    """Entries met so far, the copied directory itself counting (as its archive's first entry)."""

    def tree(self, top: int, dest: Path) -> None:
        """Breadth first, each directory's entries in name order; every descriptor is closed."""
        pending: deque[tuple[int, str]] = deque([(top, "")])
        try:
            while pending:
                directory, prefix = pending[0]
                with os.scandir(directory) as listing:
                    names = sorted(entry.name for entry in listing)
                for name in names:
                    inner = self.entry(directory, name, prefix + name, dest)
                    if inner is not None:
                        pending.append((inner, f"{prefix}{name}/"))
                os.close(pending.popleft()[0])
        finally:
            for directory, _ in pending:
                os.close(directory)

    def entry(self, directory: int, name: str, relative: str, dest: Path) -> int | None:
        """Copy one entry; the descriptor of a directory to walk next."""
        self.entries += 1
        report = self.report
        try:
            info = os.stat(name, dir_fd=directory, follow_symlinks=False)
        except OSError:
            return None  # gone meanwhile
        if self.entries > self.max_entries:
            report.skipped.append(f"{relative}: over the {self.max_entries}-entry cap")
        elif stat.S_ISDIR(info.st_mode):
            try:
                inner = os.open(name, _DIR_FLAGS, dir_fd=directory)
            except OSError:
                report.skipped.append(f"{relative}: could not be read")
                return None
            (dest / relative).mkdir(mode=0o755)
            return inner
        elif stat.S_ISLNK(info.st_mode):
            with contextlib.suppress(OSError):
                target = os.readlink(name, dir_fd=directory)
                report.skipped.append(f"{relative}: symlink to {target} not kept")
        elif not stat.S_ISREG(info.st_mode):
            report.skipped.append(f"{relative}: {_describe(info)} not kept")
        elif report.bytes + info.st_size > self.max_bytes:
            report.skipped.append(f"{relative}: over the {self.max_bytes}-byte cap")
        elif self._copy_file(directory, name, dest / relative, info):
            report.files += 1
        else:
            report.skipped.append(f"{relative}: could not be written")
        return None

    def _copy_file(self, directory: int, name: str, target: Path, info: os.stat_result) -> bool:
        """The file's first `st_size` bytes as the stat saw it (an archive's header fixes the size
        the same way), written anew; False when it is no longer a regular file."""
        source = open_regular(directory, name)
        if source is None:
            return False
        mode = 0o755 if info.st_mode & 0o111 else 0o644
        with source, os.fdopen(os.open(target, _NEW_FILE_FLAGS, mode), "wb") as out:
            left = info.st_size
            while left > 0 and (chunk := source.read(min(_CHUNK, left))):
                out.write(chunk)
                left -= len(chunk)
        self.report.bytes += info.st_size - left
        return True


__all__ = ["RUNTIME_MOUNTS", "HostFiles", "Unreachable"]
