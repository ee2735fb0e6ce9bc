"""Unpacking an archive (`.tar`, `.tar.gz`/`.tgz`, `.zip`) into an empty directory, or refusing it.

Archives come from users and registries, so unpacking assumes they are hostile. Every entry is
checked before anything is written (absolute paths, `..` components, links that escape, devices and
FIFOs, entries nested under a non-directory, duplicates, entry count and total size); files are then
written with no symlink yet present, symlinks are created last and re-checked by resolving them on
disk (catching chains of links that only escape together).

Apart from archive.py, which packs tasks and moves an unpacked one into place: this is the part that
must hold against an attacker, so it reads on its own, with one way in (`unpack_into`; the uploads'
check of a file name shares `length_problem`).
"""

import contextlib
import gzip
import io
import os
import posixpath
import re
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from envloop.tasks.model import TaskFormatError

_MAX_LINK_TARGET = 4096
_NAME_SHOWN = 120
_CHUNK = 1 << 20
_DRIVE = re.compile(r"^[A-Za-z]:")
_IN_MEMORY_BYTES = 1 << 20
_INFLATED_BYTES = 1 << 24
"""A gzip archive up to `_IN_MEMORY_BYTES` is read whole, once, and inflated in one call when its
tar, headers included, is no larger than the content allowed and `_INFLATED_BYTES`. Anything
larger is streamed: tarfile refuses an oversized member from its header, without inflating it."""
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS
"""zlib's window bits for a gzip header and trailer (checked: the CRC and the length)."""


class ArchiveTooLarge(TaskFormatError):
    """The archive holds more entries or more content than the extraction allows."""


@dataclass
class _Member:
    name: str
    kind: Literal["dir", "file", "symlink", "hardlink"]
    size: int = 0
    executable: bool = False
    link: str = ""
    """Symlink target text, or the member name a hardlink refers to."""
    open: Callable[[], IO[bytes]] | None = None


def unpack_into(archive: Path, directory: Path, max_bytes: int, max_entries: int) -> None:
    """Every member of `archive`, checked first, written below the empty `directory`."""
    with _open_members(archive, min(_INFLATED_BYTES, max_bytes)) as members:
        checked = _check_members(archive, members, max_bytes, max_entries)
        _write_members(archive, directory, checked, max_bytes)


@contextlib.contextmanager
def _open_members(archive: Path, max_inflated: int) -> Iterator[Iterator[_Member]]:
    """The format is told as it always was: a `.zip` name or a zip directory at the end, else
    whatever tarfile recognises."""
    if not archive.is_file():
        raise TaskFormatError(archive, "no such file" if not archive.exists() else "not a regular file")
    try:
        data = _small_gzip(archive)
        if archive.name.endswith(".zip") or zipfile.is_zipfile(archive if data is None else io.BytesIO(data)):
            with zipfile.ZipFile(archive) as zf:
                yield _zip_members(archive, zf)
        else:
            with _open_tar(archive, data, max_inflated) as tar:
                yield _tar_members(archive, tar)
    except (
        tarfile.TarError,
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        EOFError,
        zlib.error,
        gzip.BadGzipFile,
    ) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise TaskFormatError(archive, f"not a readable archive ({reason})") from None


def _small_gzip(archive: Path) -> bytes | None:
    """The whole archive, read with one open, when it is gzip and at most `_IN_MEMORY_BYTES` (a
    task packed by the store): probed and parsed in memory instead of opened again by each probe."""
    fd = os.open(archive, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size > _IN_MEMORY_BYTES:
            return None
        chunks = []
        while chunk := os.read(fd, size + 1):
            chunks.append(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return data if data.startswith(_GZIP_MAGIC) else None


def _open_tar(archive: Path, data: bytes | None, max_inflated: int) -> tarfile.TarFile:
    """The gzipped tar in `data` inflated in one call and read as a plain one: tarfile's own gzip
    reader reads and seeks in small steps, which costs more than the rest of a small task's parsing.
    Anything else, or gzip that does not inflate cleanly (truncated, corrupt, trailing data, over
    `max_inflated`) or open as a tar, is read by tarfile from the file as it always was: refused
    with the reasons it always gave. The gzip trailer's last four bytes give the inflated length,
    so a stream longer than `max_inflated` goes that way uninflated (one whose trailer lies costs
    `max_inflated` of inflating first)."""
    if data is not None and int.from_bytes(data[-4:], "little") <= max_inflated:
        inflater = zlib.decompressobj(wbits=_GZIP_WBITS)
        try:
            inflated = inflater.decompress(data, max_inflated)
            if inflater.eof and not inflater.unused_data:
                return tarfile.open(fileobj=_Inflated(inflated), mode="r:")
        except (zlib.error, tarfile.TarError):
            pass
    return tarfile.open(archive, mode="r:*")


class _Inflated(io.BytesIO):
    """Inflated gzip that seeks as tarfile's gzip reader does, so a hostile archive reads the same
    either way: a position before the start is the start (a member of negative size sends tarfile
    back), where BytesIO would raise."""

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return super().seek(max(offset, 0) if whence == io.SEEK_SET else offset, whence)

    def content(self, offset: int, size: int) -> IO[bytes] | None:
        """A member's content, sliced out (cheaper than tarfile's reader), when it lies wholly
        within the data; None otherwise, for tarfile's reader to read or refuse as it does."""
        data = self.getvalue()
        if size < 0 or offset < 0 or offset + size > len(data):
            return None
        return io.BytesIO(data[offset : offset + size])


def _refuse(archive: Path, raw_name: str, why: str) -> TaskFormatError:
    shown = raw_name if len(raw_name) <= _NAME_SHOWN else raw_name[:_NAME_SHOWN] + "…"
    return TaskFormatError(archive, why, field=f"entry {shown!r}")


def _path_problem(raw: str) -> str | None:
    if "\0" in raw or "\\" in raw:
        return "backslash or NUL in an entry name is not allowed"
    if raw.startswith("/") or _DRIVE.match(raw):
        return "absolute path is not allowed"
    if ".." in raw.split("/"):
        return "'..' in a path is not allowed"
    return length_problem(raw)


NAME_MAX_BYTES = 255
PATH_MAX_BYTES = 4096
"""What a file system takes: a name (one path component) and a whole path, in bytes."""


def length_problem(path: str, what: str = "a name") -> str | None:
    """Why a relative path cannot be written on a file system (a name or the whole path too long)."""
    total = len(path.encode("utf-8", errors="surrogateescape"))
    if total > PATH_MAX_BYTES:
        return f"a path of {total} bytes is longer than the {PATH_MAX_BYTES} allowed"
    for part in path.split("/"):
        size = len(part.encode("utf-8", errors="surrogateescape"))
        if size > NAME_MAX_BYTES:
            return f"{what} of {size} bytes is longer than the {NAME_MAX_BYTES} allowed"
    return None


def _normalize(archive: Path, raw: str) -> str:
    """The entry's relative POSIX path, or "" for the archive root itself (`./`)."""
    problem = _path_problem(raw)
    if problem is not None:
        raise _refuse(archive, raw, problem)
    return "/".join(part for part in raw.split("/") if part not in ("", "."))


def _tar_members(archive: Path, tar: tarfile.TarFile) -> Iterator[_Member]:
    for info in tar:
        name = _normalize(archive, info.name)
        if info.isdir():
            yield _Member(name, "dir")
        elif info.isreg():
            yield _Member(
                name, "file", info.size, bool(info.mode & 0o111), open=_tar_opener(archive, tar, info)
            )
        elif info.issym():
            yield _Member(name, "symlink", link=info.linkname)
        elif info.islnk():
            yield _Member(name, "hardlink", link=info.linkname)
        else:
            kind = "FIFO" if info.isfifo() else "device file" if info.isdev() else "special entry"
            raise _refuse(archive, info.name, f"a {kind} is not allowed")


def _tar_opener(archive: Path, tar: tarfile.TarFile, info: tarfile.TarInfo) -> Callable[[], IO[bytes]]:
    def open_member() -> IO[bytes]:
        inflated = tar.fileobj
        if isinstance(inflated, _Inflated) and info.sparse is None:
            content = inflated.content(info.offset_data, info.size)
            if content is not None:
                return content
        handle = tar.extractfile(info)
        if handle is None:
            raise _refuse(archive, info.name, "entry has no content")
        return handle

    return open_member


def _zip_members(archive: Path, zf: zipfile.ZipFile) -> Iterator[_Member]:
    for info in zf.infolist():
        name = _normalize(archive, info.filename)
        mode = info.external_attr >> 16
        if info.flag_bits & 0x1:
            raise _refuse(archive, info.filename, "encrypted entries are not supported")
        if stat.S_ISLNK(mode):
            if info.file_size > _MAX_LINK_TARGET:
                raise _refuse(archive, info.filename, "symlink target is too long")
            target = zf.read(info).decode("utf-8", errors="surrogateescape")
            yield _Member(name, "symlink", link=target)
        elif stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
            raise _refuse(archive, info.filename, "a FIFO, socket or device file is not allowed")
        elif info.is_dir():
            yield _Member(name, "dir")
        else:
            yield _Member(name, "file", info.file_size, bool(mode & 0o111), open=_zip_opener(zf, info))


def _zip_opener(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Callable[[], IO[bytes]]:
    def open_member() -> IO[bytes]:
        return zf.open(info)

    return open_member


def _check_members(
    archive: Path, members: Iterator[_Member], max_bytes: int, max_entries: int
) -> list[_Member]:
    kept: list[_Member] = []
    kinds: dict[str, str] = {"": "dir"}
    total = 0
    for count, member in enumerate(members, start=1):
        if count > max_entries:
            raise ArchiveTooLarge(archive, f"more than {max_entries} entries")
        total += member.size
        if total > max_bytes:
            raise ArchiveTooLarge(archive, f"content larger than {max_bytes} bytes")
        if member.name == "" and member.kind == "dir":
            continue
        if member.name in kinds:
            raise _refuse(archive, member.name, "appears more than once")
        if member.kind == "symlink":
            _check_symlink(archive, member)
        elif member.kind == "hardlink":
            _check_hardlink(archive, member, kinds)
        kinds[member.name] = member.kind
        kept.append(member)
    for member in kept:
        parent = posixpath.dirname(member.name)
        while parent:
            if kinds.get(parent, "dir") != "dir":
                raise _refuse(archive, member.name, f"is inside {parent!r}, which is not a directory")
            parent = posixpath.dirname(parent)
    return kept


def _check_hardlink(archive: Path, member: _Member, kinds: dict[str, str]) -> None:
    """A hardlink may only repeat a regular file that came earlier in the same archive."""
    problem = _path_problem(member.link)
    if problem is not None:
        raise _refuse(archive, member.name, f"hardlink to {member.link!r}: {problem}")
    target = _normalize(archive, member.link)
    if kinds.get(target) != "file":
        raise _refuse(archive, member.name, f"hardlink to {member.link!r}, which is not a file above it")
    member.link = target


def _check_symlink(archive: Path, member: _Member) -> None:
    target = member.link
    if not target or "\0" in target:
        raise _refuse(archive, member.name, "symlink has an empty or invalid target")
    if target.startswith("/") or _DRIVE.match(target):
        raise _refuse(archive, member.name, f"symlink to an absolute path ({target}) is not allowed")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(member.name), target))
    if resolved == ".." or resolved.startswith("../"):
        raise _refuse(archive, member.name, f"symlink to {target} points outside the archive")


def _write_members(archive: Path, tmp: Path, members: list[_Member], max_bytes: int) -> None:
    """Each parent directory is made once, as it is first needed, and each file with one open
    (its mode set there) and one write: a small task's cost is mostly these system calls."""
    made = {""}
    written = 0
    prefix = os.fspath(tmp)
    for member in members:
        path = f"{prefix}/{member.name}"  # a plain string: pathlib's parsing costs as much as the write
        if member.kind == "dir":
            _make_directories(tmp, member.name, made)
            continue
        _make_directories(tmp, posixpath.dirname(member.name), made)
        if member.kind == "file" and member.open is not None:
            with member.open() as source:
                written += _copy_bounded(archive, member, source, path, max_bytes - written)
        elif member.kind == "hardlink":
            with (tmp / member.link).open("rb") as source:
                member.executable = bool(os.fstat(source.fileno()).st_mode & 0o100)
                written += _copy_bounded(archive, member, source, path, max_bytes - written, exact=False)
    links = [member for member in members if member.kind == "symlink"]
    for member in links:
        (tmp / member.name).symlink_to(member.link)
    if not links:
        return
    root = tmp.resolve()
    for member in links:
        if not _resolves_inside(tmp / member.name, root):
            raise _refuse(archive, member.name, f"symlink to {member.link} points outside the archive")


def _make_directories(tmp: Path, name: str, made: set[str], mode: int = 0o755) -> None:
    """`name` below `tmp` with `mode`, and its missing parents with the default mode (both less the
    umask, as `mkdir -p` makes them), unless already in `made`."""
    if name in made:
        return
    _make_directories(tmp, posixpath.dirname(name), made, 0o777)
    path = tmp / name
    try:
        path.mkdir(mode=mode)
    except FileExistsError:
        if not path.is_dir():
            raise
    made.add(name)


def _resolves_inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root)
    except (RuntimeError, OSError):
        return False


def _copy_bounded(
    archive: Path, member: _Member, source: IO[bytes], path: str, budget: int, *, exact: bool = True
) -> int:
    """Copy at most the declared size and the remaining budget; an archive lying about sizes is refused."""
    limit = min(member.size, budget) if exact else budget
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    fd = os.open(path, flags, 0o755 if member.executable else 0o644)
    copied = 0
    try:
        while chunk := source.read(_CHUNK):
            copied += len(chunk)
            if copied > limit:
                raise _refuse(archive, member.name, "content is larger than declared or than the size cap")
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    return copied
