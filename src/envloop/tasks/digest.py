"""Content digest of a task directory, and the one walk that decides which entries belong to a task.

The digest is what makes a task revision immutable and a push idempotent: identical content must give
the identical digest wherever it was copied, whatever its timestamps or owners. It is

    "sha256:" + sha256( for each entry, sorted by relative POSIX path:
                        path + "\\0" + kind + "\\0" + sha256(content) + "\\n" )

where kind is `file` (content = the bytes) or `link` (content = the link's target text). Paths are
encoded as the file system's bytes (UTF-8 with surrogate escapes), so any name hashes losslessly.

Not hashed, so that tooling noise never turns into a new revision:
- directories named in `IGNORED_DIRS` (version control and caches) and files named in
  `IGNORED_FILES`, wherever they appear;
- directories themselves: an empty directory carries no content;
- permission bits and timestamps.

Refused with a TaskFormatError, because a frozen copy of them cannot be trusted to mean the same thing
elsewhere: symlinks whose target is absolute or resolves outside the task (through any chain of links),
and sockets, FIFOs and device files.
"""

import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from envloop.tasks.model import TaskFormatError

IGNORED_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
)
IGNORED_FILES = frozenset({".DS_Store"})

_CHUNK = 1 << 20


@dataclass(frozen=True)
class TaskEntry:
    """One hashed member of a task: a regular file or an in-task symlink."""

    path: str
    """Relative POSIX path inside the task."""
    kind: Literal["file", "link"]
    source: Path
    """Where the entry lives on disk."""
    link_target: str | None = None
    executable: bool = False


def _check_link(root_real: Path, link: Path, rel: str) -> str:
    target = str(link.readlink())
    if Path(target).is_absolute():
        raise TaskFormatError(link, f"symlink to an absolute path ({target}) is not allowed in a task")
    try:
        resolved = link.resolve()
    except (RuntimeError, OSError):
        raise TaskFormatError(link, f"symlink {rel} -> {target} is part of a symlink loop") from None
    if not resolved.is_relative_to(root_real):
        raise TaskFormatError(link, f"symlink {rel} -> {target} points outside the task")
    return target


def task_entries(root: Path) -> list[TaskEntry]:
    """Every file and symlink of the task, sorted by path; refuses unsafe entries (see module doc)."""
    if not root.is_dir():
        raise TaskFormatError(root, "not a directory")
    root_real = root.resolve()
    entries = list(_walk(root, root_real))
    entries.sort(key=lambda entry: entry.path)
    return entries


def _walk(root: Path, root_real: Path) -> Iterator[TaskEntry]:
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=_raise_walk_error):
        base = Path(dirpath)
        kept_dirs = []
        for dirname in dirnames:
            if dirname in IGNORED_DIRS:
                continue
            if (base / dirname).is_symlink():
                filenames.append(dirname)
            else:
                kept_dirs.append(dirname)
        dirnames[:] = kept_dirs
        for filename in filenames:
            if filename in IGNORED_FILES:
                continue
            yield _entry(root, root_real, base / filename)


def _raise_walk_error(error: OSError) -> None:
    raise TaskFormatError(error.filename or "?", f"cannot read ({error.strerror})")


def _entry(root: Path, root_real: Path, path: Path) -> TaskEntry:
    rel = path.relative_to(root).as_posix()
    mode = path.lstat().st_mode
    if stat.S_ISLNK(mode):
        return TaskEntry(rel, "link", path, link_target=_check_link(root_real, path, rel))
    if stat.S_ISREG(mode):
        return TaskEntry(rel, "file", path, executable=bool(mode & stat.S_IXUSR))
    kind = "socket" if stat.S_ISSOCK(mode) else "FIFO" if stat.S_ISFIFO(mode) else "device file"
    raise TaskFormatError(path, f"a {kind} cannot be part of a task")


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in chunks so large build contexts stay cheap in memory."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def entries_digest(entries: list[TaskEntry]) -> str:
    """The digest of already-walked entries (they must be sorted by path, as `task_entries` returns)."""
    total = hashlib.sha256()
    for entry in entries:
        if entry.kind == "link":
            content = hashlib.sha256(os.fsencode(entry.link_target or "")).hexdigest()
        else:
            content = file_sha256(entry.source)
        total.update(os.fsencode(entry.path) + b"\0" + entry.kind.encode() + b"\0" + content.encode() + b"\n")
    return "sha256:" + total.hexdigest()


def task_digest(root: Path) -> str:
    """`sha256:<hex>` over the task's sorted relative paths and each entry's hash (see module doc)."""
    return entries_digest(task_entries(root))
