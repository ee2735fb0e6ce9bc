"""Keeping a trial's files: copy them out of the instance, masking secret values on the way.

Every environment hands what leaves it through here, by way of `Outgoing` (environments/outgoing.py),
so no provider can forget to mask.

Secrets are masked in every kept file, not only in ones that look like text: a leaked key in a
binary log is still leaked, and in file names too. Files are streamed in chunks, so large logs
never sit in memory. Only regular files are copied and none is opened through a symlink: a command
inside the sandbox could otherwise plant `logs/agent/x -> /root/.ssh/id_rsa` and have the host
copy that file out for it.

A kept file holds at most `MAX_KEPT_FILE_BYTES`: of a longer one (a runaway 1 GB stdout) the first
and last halves of that are kept, with a line in between saying how many bytes were cut, and the
cut is reported to the caller. A secret that straddles a cut is masked on both sides.

When no secret needs masking and the tree holds only directories and regular files none of which
is too long, it is moved instead of copied: one rename instead of a copy per file. The trial's
processes are gone by then (the runner stops the environment first), so nothing can plant a link
or grow a file after the check.
"""

import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from envloop.core.masking import MASK, mask_text
from envloop.environments.tree_walk import MAX_AGENT_TREE_DEPTH, TreeWalk

_CHUNK = 1024 * 1024


MAX_KEPT_FILE_BYTES = 32 * 1024 * 1024
"""The most of one log file that is kept: its first and last 16 MiB."""


def _mask_bytes(data: bytes, secrets: list[bytes]) -> bytes:
    for secret in secrets:
        data = data.replace(secret, MASK)
    return data


def walk_tree(root: Path) -> Iterator[os.DirEntry[str]]:
    """Every entry below `root`, depth first, never through a link; a directory comes before what
    it holds. OSError (a directory vanished or unreadable) reaches the caller. For trees the worker
    made (a task's files); one an agent made is walked with a depth bound (tree_walk.py)."""
    return iter(TreeWalk(root))


def mask_bytes(data: bytes, secrets: Iterable[str]) -> bytes:
    """`data` with every secret masked, longest first (as `mask_text` does for text)."""
    return _mask_bytes(data, sorted({s.encode() for s in secrets if s}, key=len, reverse=True))


def _overlap(data: bytes, secrets: list[bytes], *, at_start: bool) -> int:
    """The length of the longest start (or end) of `data` that is a proper end (or start) of a
    secret: what a cut may have left of a secret that began (or continues) beyond it."""
    best = 0
    for secret in secrets:
        for size in range(min(len(secret) - 1, len(data)), best, -1):
            if (data[:size] == secret[-size:]) if at_start else (data[-size:] == secret[:size]):
                best = size
                break
    return best


def _stream(
    source: BinaryIO, out: BinaryIO, secrets: list[bytes], budget: int, *, cut_before: bool, cut_after: bool
) -> None:
    """Copy up to `budget` bytes, masking secrets; a cut before (after) this stretch masks what
    may be the rest (the start) of a secret cut in two."""
    keep = max((len(s) for s in secrets), default=1) - 1
    carry = b""
    first = True
    while budget > 0 and (chunk := source.read(min(_CHUNK, budget))):
        budget -= len(chunk)
        if first and cut_before and secrets:
            cut = _overlap(chunk, secrets, at_start=True)
            chunk = (MASK if cut else b"") + chunk[cut:]
        first = False
        buffer = _mask_bytes(carry + chunk, secrets)
        split = max(0, len(buffer) - keep)
        out.write(buffer[:split])
        carry = buffer[split:]
    carry = _mask_bytes(carry, secrets)
    if cut_after and secrets:
        cut = _overlap(carry, secrets, at_start=False)
        carry = carry[: len(carry) - cut] + (MASK if cut else b"")
    out.write(carry)


def _copy_masked(source_fd: int, target: Path, secrets: list[bytes]) -> int:
    """Copy one file, masked and capped; returns how many bytes were cut from its middle."""
    size = os.fstat(source_fd).st_size
    with os.fdopen(source_fd, "rb") as source, target.open("wb") as out:
        if size <= MAX_KEPT_FILE_BYTES:
            _stream(source, out, secrets, size, cut_before=False, cut_after=False)
            return 0
        head = MAX_KEPT_FILE_BYTES // 2
        tail = MAX_KEPT_FILE_BYTES - head
        _stream(source, out, secrets, head, cut_before=False, cut_after=True)
        cut = size - head - tail
        out.write(f"\n[envloop: {cut:,} bytes of this {size:,}-byte file were cut here]\n".encode())
        source.seek(size - tail)
        _stream(source, out, secrets, tail, cut_before=True, cut_after=False)
        return cut


MAX_KEPT_FILES = 10_000
"""The most files one trial keeps, whatever its disk quota: a trial that leaves 200,000 files in its
log directory would otherwise take seconds to collect and make its pages unusable."""


@dataclass
class KeepBudget:
    """What a trial may still keep: files and bytes (its disk quota). Everything kept from the
    trial (captured output, copied directories and files) is charged to it."""

    files: int
    bytes: int
    refused_files: int = 0
    refused_bytes: int = 0
    unwalked_directories: int = 0
    """Directories deeper than `MAX_AGENT_TREE_DEPTH` levels: not entered, so what they hold is
    neither kept nor counted."""

    def take(self, size: int) -> bool:
        """Charge one file of `size` bytes; False (and counted as refused) when it does not fit."""
        if self.files < 1 or size > self.bytes:
            self.refused_files += 1
            self.refused_bytes += size
            return False
        self.files -= 1
        self.bytes -= size
        return True

    def charge_capture(self, capture: BinaryIO) -> bool:
        """Charge a command's capture file (which the caller keeps) as one file, cutting what does
        not fit; False when some of it was cut."""
        capture.flush()
        size = os.fstat(capture.fileno()).st_size
        allowed = min(size, self.bytes)
        self.bytes -= allowed
        self.files = max(0, self.files - 1)
        if allowed == size:
            return True
        capture.truncate(allowed)
        self.refused_bytes += size - allowed
        return False

    def note(self) -> str | None:
        """One line on what was not kept, if anything was not."""
        notes = []
        if self.refused_files:
            notes.append(
                f"{self.refused_files:,} file(s) ({self.refused_bytes:,} bytes) were not kept: the trial's "
                f"cap on what it keeps (its disk quota, at most {MAX_KEPT_FILES:,} files) was used up"
            )
        if self.unwalked_directories:
            notes.append(
                f"{self.unwalked_directories:,} directory(ies) more than {MAX_AGENT_TREE_DEPTH} levels deep "
                "were not kept, nor what they hold"
            )
        return "; ".join(notes) or None


def keep_file(data: bytes, target: Path, budget: KeepBudget, secrets: Iterable[str]) -> list[str]:
    """Keep the file `data` (read with one byte more than a kept file may hold) at `target`, masked
    and cut, charging `budget`; one note per thing a reader should know, naming no path."""
    if not budget.take(min(len(data), MAX_KEPT_FILE_BYTES)):
        return ["not kept, the trial's cap on what it keeps was used up"]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(mask_bytes(data[:MAX_KEPT_FILE_BYTES], secrets))
    if len(data) > MAX_KEPT_FILE_BYTES:
        return [f"only its first {MAX_KEPT_FILE_BYTES:,} bytes were kept"]
    return []


def _is_real_directory(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def plain_tree(source: Path, max_entries: int | None = None, max_bytes: int | None = None) -> bool | None:
    """True when `source` is a directory holding only directories and regular files of at most
    `MAX_KEPT_FILE_BYTES`, False when it is not (a link, a device, a file too long to keep whole,
    unreadable, deeper than `MAX_AGENT_TREE_DEPTH`), None when it has more than `max_entries` entries
    or its files more than `max_bytes` bytes."""
    return plain_trees([source], max_entries, max_bytes)


def plain_trees(
    sources: Iterable[Path], max_entries: int | None = None, max_bytes: int | None = None
) -> bool | None:
    """`plain_tree` of each of `sources`, their entries and bytes counted together against the
    limits: False as soon as one is not plain, None as soon as they are over."""
    seen = total = 0
    for source in sources:
        if not _is_real_directory(source):
            return False
        walk = TreeWalk(source, MAX_AGENT_TREE_DEPTH)
        try:
            for entry in walk:
                seen += 1
                if entry.is_file(follow_symlinks=False):
                    size = entry.stat(follow_symlinks=False).st_size
                    if size > MAX_KEPT_FILE_BYTES:
                        return False
                    total += size
                elif not entry.is_dir(follow_symlinks=False):
                    return False
                if max_entries is not None and seen > max_entries:
                    return None
                if max_bytes is not None and total > max_bytes:
                    return None
        except OSError:
            return False
        if walk.not_entered:
            return False
    return True


INLINE_ENTRIES = 64
INLINE_BYTES = 1 << 20


def small_plain_tree(source: Path) -> bool:
    """Whether `source` is a plain tree (see `plain_tree`) of at most `INLINE_ENTRIES` entries and
    `INLINE_BYTES` bytes: one a caller on the event loop keeps in place, because handing it to a
    thread and back costs more than copying it (a trial's logs are mostly a few small files)."""
    return plain_tree(source, INLINE_ENTRIES, INLINE_BYTES) is True


def move_plain_tree(
    source: Path,
    target: Path,
    secrets: Iterable[str],
    max_entries: int | None = None,
    budget: KeepBudget | None = None,
) -> bool:
    """Move a tree of plain files into place when no secret needs masking; False (nothing moved)
    when it must be copied instead (secrets, links, more than `max_entries`, another file system,
    more than fits in `budget`, which is charged for what moved)."""
    if any(secrets) or plain_tree(source, max_entries) is not True:
        return False
    files = total = 0
    if budget is not None:
        # Counted as walked, never listed: a tree of millions of files costs no memory here.
        for entry in TreeWalk(source, MAX_AGENT_TREE_DEPTH):
            if entry.is_file(follow_symlinks=False):
                files += 1
                total += entry.stat(follow_symlinks=False).st_size
                if files > budget.files or total > budget.bytes:
                    return False
    try:
        source.rename(target)
    except OSError:
        return False
    if budget is not None:
        budget.files -= files
        budget.bytes -= total
    return True


def keep_tree(source: Path, target: Path, secrets: Iterable[str]) -> list[str]:
    """Keep `source` at `target`: moved when that is safe, else copied with secrets masked and long
    files cut. Returns a note for each file that was cut (the runner adds them to the trial's
    warnings), empty when everything was kept whole."""
    secrets = list(secrets)
    if move_plain_tree(source, target, secrets) or _merge_plain_tree(source, target, secrets):
        return []
    return copy_tree_masked(source, target, secrets).notes


def _merge_plain_tree(source: Path, target: Path, secrets: list[str]) -> bool:
    """Move the files of a small plain tree one by one into the directory `target` that already
    exists (the logs a command left join the output the worker captured there), a name already taken
    getting a numbered sibling as a copy would give it; the emptied `source` goes. False when the
    tree must be copied instead (secrets, links, more than `INLINE_ENTRIES`), or what a failed move
    left is copied after it."""
    if any(secrets) or not _is_real_directory(target) or plain_tree(source, INLINE_ENTRIES) is not True:
        return False
    entries = [(Path(entry.path), entry.is_dir(follow_symlinks=False)) for entry in TreeWalk(source)]
    try:
        for path, is_directory in entries:
            if not is_directory:
                destination = _free(target / path.relative_to(source))
                destination.parent.mkdir(parents=True, exist_ok=True)
                path.rename(destination)
        for path in [source, *(path for path, is_directory in entries if is_directory)][::-1]:
            path.rmdir()
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class KeptFiles:
    copied: int
    notes: list[str]
    """One line per file cut to its head and tail, naming it (masked) and the bytes cut."""


def copy_tree_masked(
    source: Path, target: Path, secrets: Iterable[str], budget: KeepBudget | None = None
) -> KeptFiles:
    """Copy the regular files under `source` to `target`, secrets masked in contents and names;
    with a `budget`, only what fits in it (the rest is counted there as refused)."""
    secret_list = [s for s in secrets if s]
    encoded = sorted({s.encode() for s in secret_list}, key=len, reverse=True)
    copied = 0
    notes: list[str] = []
    if not _is_real_directory(source):
        return KeptFiles(0, [])
    walk = TreeWalk(source, MAX_AGENT_TREE_DEPTH, skip_unreadable=True)
    for path in _below(walk):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (
            budget is not None and not budget.take(min(info.st_size, MAX_KEPT_FILE_BYTES))
        ):
            os.close(fd)
            continue
        relative = mask_text(path.relative_to(source).as_posix(), secret_list)
        destination = _free(target / relative)
        destination.parent.mkdir(parents=True, exist_ok=True)
        cut = _copy_masked(fd, destination, encoded)
        if cut:
            kept = destination.relative_to(target).as_posix()
            notes.append(f"{target.name}/{kept}: {cut:,} bytes were cut from the middle of this log")
        copied += 1
    if budget is not None:
        budget.unwalked_directories += walk.not_entered
    return KeptFiles(copied, notes)


def _below(walk: TreeWalk) -> Iterator[Path]:
    """Every entry of `walk` but its directories: one open listing per level, each read as it is
    listed, so neither a directory of millions of names nor millions of directories side by side
    are ever held (`os.walk` holds a directory's names at once, and a list of directories still to
    enter holds one path per directory); a directory that cannot be read is passed over."""
    for entry in walk:
        if not entry.is_dir(follow_symlinks=False):
            yield Path(entry.path)


def _free(path: Path) -> Path:
    """`path`, or a numbered sibling when two names mask alike (`a-***.txt` twice)."""
    candidate, number = path, 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}.{number}")
    return candidate
