"""The environment state a step leaves behind: snapshots of a working directory and the files a
step created, modified or deleted between two of them, with a unified diff for text files.

Snapshots read files without following symlinks (a sandboxed command may plant a link to a host
file; the link itself is recorded, never its target's content). A file whose size and modification
time are unchanged since the previous snapshot is not read again, so snapshotting after every tool
call costs little in a large tree. Content is kept for diffing only for text files up to
`TEXT_LIMIT` bytes; diffs are cut at `DIFF_LIMIT` characters.
"""

import difflib
import hashlib
import os
import stat
import time
from dataclasses import dataclass, replace
from pathlib import Path

from envloop.core.trajectory import FileChange

TEXT_LIMIT = 256 * 1024
DIFF_LIMIT = 64 * 1024
FILE_LIMIT = 20_000
SKIPPED_DIRS = frozenset({".git", "__pycache__", "node_modules", ".venv"})
_RACY_NS = 50_000_000
"""Files modified less than this before a snapshot are not trusted by size and time next time."""


@dataclass(frozen=True)
class FileState:
    size: int
    mtime_ns: int
    digest: str
    text: str | None = None
    binary: bool = False
    racy: bool = False
    """Modified just before the snapshot was taken: its size and time alone cannot vouch for it."""


Snapshot = dict[str, FileState]


def link_state(target: str, mtime_ns: int) -> FileState:
    """A symlink as a snapshot records it: its target, never what the target holds."""
    return FileState(len(target), mtime_ns, "link:" + target, text=f"-> {target}\n")


def content_state(size: int, mtime_ns: int, digest: str, head: bytes) -> FileState:
    """A regular file from its sha256 hex `digest` and the start of its content (at least
    `TEXT_LIMIT` bytes when it is longer), kept as text when it is short UTF-8 without NULs."""
    text: str | None = None
    binary = b"\0" in head[:8192]
    if not binary and size <= TEXT_LIMIT:
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError:
            binary = True
    return FileState(size, mtime_ns, "sha256:" + digest, text, binary)


def is_racy(mtime_ns: int, taken_ns: int) -> bool:
    """Modified so shortly before a snapshot taken at `taken_ns` that size and time cannot vouch
    for it next time."""
    return mtime_ns >= taken_ns - _RACY_NS


def _read_state(path: str, info: os.stat_result) -> FileState | None:
    if stat.S_ISLNK(info.st_mode):
        return link_state(str(Path(path).readlink()), info.st_mtime_ns)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        digest = hashlib.sha256()
        head = b""
        while chunk := handle.read(1024 * 1024):
            if len(head) <= TEXT_LIMIT:
                head += chunk
            digest.update(chunk)
    return content_state(info.st_size, info.st_mtime_ns, digest.hexdigest(), head)


def _entries(directory: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as listing:
            return sorted(listing, key=lambda entry: entry.name)
    except OSError:
        return []


def snapshot(root: Path, previous: Snapshot | None = None) -> Snapshot:
    """Every regular file and symlink under `root`, by relative path (tool caches skipped)."""
    earlier_states = previous or {}
    taken = time.time_ns()
    states: Snapshot = {}
    pending = [("", str(root))]
    while pending:
        prefix, directory = pending.pop()
        subdirectories = []
        for entry in _entries(directory):
            rel = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):  # a link to a directory is recorded, not entered
                if entry.name not in SKIPPED_DIRS:
                    subdirectories.append((rel + "/", entry.path))
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
                continue
            if len(states) >= FILE_LIMIT:
                return states
            earlier = earlier_states.get(rel)
            if (
                earlier is not None
                and not earlier.racy
                and (earlier.size, earlier.mtime_ns)
                == (
                    info.st_size,
                    info.st_mtime_ns,
                )
            ):
                states[rel] = earlier
                continue
            state = _read_state(entry.path, info)
            if state is not None:
                states[rel] = replace(state, racy=True) if is_racy(info.st_mtime_ns, taken) else state
        pending.extend(reversed(subdirectories))
    return states


def _diff(path: str, before: str | None, after: str | None) -> tuple[str, bool]:
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        (after or "").splitlines(keepends=True),
        fromfile="/dev/null" if before is None else f"a/{path}",
        tofile="/dev/null" if after is None else f"b/{path}",
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if len(text) > DIFF_LIMIT:
        return text[:DIFF_LIMIT], True
    return text, False


def _change(path: str, before: FileState | None, after: FileState | None) -> FileChange:
    kind = "created" if before is None else "deleted" if after is None else "modified"
    binary = any(s is not None and (s.binary or s.text is None) for s in (before, after))
    diff, truncated = (None, False)
    if not binary:
        diff, truncated = _diff(path, before.text if before else None, after.text if after else None)
    return FileChange(
        path=path,
        change=kind,
        size=after.size if after else None,
        binary=binary,
        diff=diff,
        diff_truncated=truncated,
    )


def changes_between(before: Snapshot, after: Snapshot) -> list[FileChange]:
    """Created, modified and deleted files, by path."""
    changed = [
        path
        for path in sorted(before.keys() | after.keys())
        if path not in before or path not in after or before[path].digest != after[path].digest
    ]
    return [_change(path, before.get(path), after.get(path)) for path in changed]
