"""Tar streams across the container boundary: packing host files in, unpacking container files out.

Files cross only as tar streams through `docker cp` (never a host directory mounted into the
container). What comes out was written by a hostile agent, so unpacking keeps regular files and
directories only: symlinks, hardlinks, devices and FIFOs are skipped and listed, names that are
absolute or climb with `..` are skipped, every file is created anew without following links, and
the total size and entry count are capped (what lies beyond a cap is skipped and said so).
"""

import io
import os
import posixpath
import stat
import tarfile
from pathlib import Path
from typing import IO, BinaryIO

from pydantic import BaseModel, Field

DEFAULT_MAX_BYTES = 1 << 30
DEFAULT_MAX_ENTRIES = 100_000
_CHUNK = 1 << 20


class Owner(BaseModel):
    """Numeric owner given to files copied in (user names mean nothing until inside the image)."""

    uid: int = Field(default=0, ge=0)
    gid: int = Field(default=0, ge=0)


class CopyOutReport(BaseModel):
    """What a copy out kept and what it refused."""

    files: int = 0
    bytes: int = 0
    skipped: list[str] = Field(default_factory=list)
    """One line per entry not kept (a link, a special file, a bad name, over a cap)."""


def pack_tree(source: Path, top: str, out: BinaryIO, owner: Owner, *, readable: bool = False) -> None:
    """Write `source` (a directory or a file) to `out` as a tar whose single top entry is `top`.

    Symlinks are packed as symlinks (never followed); sockets, FIFOs and devices are left out.
    `readable` lets every user read each file and enter each directory (whoever runs the tests).
    """

    def own(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if not (info.isreg() or info.isdir() or info.issym()):
            return None
        info.uid, info.gid = owner.uid, owner.gid
        info.uname = info.gname = ""
        if readable and not info.issym():
            info.mode |= 0o555 if info.isdir() else 0o444
        return info

    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(str(source), arcname=top, recursive=True, filter=own)


def pack_bytes(data: bytes, name: str, mode: int, owner: Owner) -> bytes:
    """A tar holding one regular file `name` with `data`."""
    buffer = io.BytesIO()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.uid, info.gid = owner.uid, owner.gid
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def pack_directories(directories: list[tuple[str, int]]) -> bytes:
    """A tar of empty directories (relative names) with the given modes, owned by root: made in a
    container by one archive upload rather than a command."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, mode in directories:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
    return buffer.getvalue()


def _relative(name: str) -> str | None:
    """The entry's path below the copied directory, or None when the name is not acceptable."""
    if "\0" in name or name.startswith("/"):
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        return None
    return "/".join(parts[1:])  # `docker cp` names every entry below the copied directory's name


def _describe(info: tarfile.TarInfo) -> str:
    if info.isdir():
        return "a directory"
    if info.issym():
        return f"symlink to {info.linkname}"
    if info.islnk():
        return "hardlink"
    if info.isfifo():
        return "FIFO"
    if info.isdev():
        return "device file"
    return "special entry"


def unpack_tree(
    archive: BinaryIO,
    dest: Path,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> CopyOutReport:
    """Unpack a `docker cp` tar of a directory into `dest` (created; it must not exist yet)."""
    dest.mkdir(parents=True, exist_ok=False)
    report = CopyOutReport()
    try:
        with tarfile.open(fileobj=archive, mode="r|") as tar:
            for entries, info in enumerate(tar, start=1):
                _unpack_entry(tar, info, dest, report, entries, max_bytes, max_entries)
    except (tarfile.TarError, EOFError) as exc:
        report.skipped.append(f"archive ended early or is unreadable: {exc}")
    return report


def _unpack_entry(
    tar: tarfile.TarFile,
    info: tarfile.TarInfo,
    dest: Path,
    report: CopyOutReport,
    entries: int,
    max_bytes: int,
    max_entries: int,
) -> None:
    relative = _relative(info.name)
    if relative is None:
        report.skipped.append(f"{info.name!r}: name outside the copied directory")
    elif entries > max_entries:
        report.skipped.append(f"{relative}: over the {max_entries}-entry cap")
    elif not relative:
        return
    elif info.isdir():
        if not _make_dirs(dest, relative):
            report.skipped.append(f"{relative}: a file of that name came first")
    elif not info.isreg():
        report.skipped.append(f"{relative}: {_describe(info)} not kept")
    elif report.bytes + info.size > max_bytes:
        report.skipped.append(f"{relative}: over the {max_bytes}-byte cap")
    else:
        source = tar.extractfile(info)
        if (
            source is None
            or not _make_dirs(dest, posixpath.dirname(relative))
            or not _write_new(dest / relative, source, info.size, info.mode)
        ):
            report.skipped.append(f"{relative}: could not be written")
            return
        report.files += 1
        report.bytes += info.size


def _make_dirs(dest: Path, relative: str) -> bool:
    """Create the directories of `relative` below `dest`; False when a non-directory is in the way
    (only files this unpacking wrote can be, and it never creates links)."""
    current = dest
    for part in [p for p in relative.split("/") if p]:
        current = current / part
        try:
            current.mkdir(mode=0o755)
        except FileExistsError:
            if not stat.S_ISDIR(current.lstat().st_mode):
                return False
    return True


def _write_new(target: Path, source: IO[bytes], size: int, mode: int) -> bool:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    try:
        fd = os.open(target, flags, 0o755 if mode & 0o111 else 0o644)
    except OSError:
        return False
    written = 0
    try:
        with io.FileIO(fd, "wb") as out:
            while written < size and (chunk := source.read(min(_CHUNK, size - written))):
                out.write(chunk)
                written += len(chunk)
    except BaseException:
        target.unlink(missing_ok=True)  # a half-written file is not kept
        raise
    return True


def read_single_file(archive: BinaryIO, max_bytes: int) -> bytes:
    """The content of the one regular file a `docker cp` tar of a file holds."""
    with tarfile.open(fileobj=archive, mode="r|") as tar:
        for info in tar:
            if not info.isreg():
                raise IsADirectoryError(f"{info.name}: not a regular file ({_describe(info)})")
            if info.size > max_bytes:
                raise ValueError(f"{info.name}: {info.size} bytes, over the {max_bytes}-byte cap")
            source = tar.extractfile(info)
            return source.read() if source is not None else b""
    raise FileNotFoundError("the archive holds no file")
