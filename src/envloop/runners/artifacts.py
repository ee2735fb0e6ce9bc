"""Keeping a trial's logs: copy them out of the instance, masking secret values on the way.

Secrets are masked in every kept file, not only in ones that look like text: a leaked key in a
binary log is still leaked. Files are streamed in chunks, so large logs never sit in memory. Only
regular files are copied and none is opened through a symlink: a command inside the sandbox could
otherwise plant `logs/agent/x -> /root/.ssh/id_rsa` and have the host copy that file out for it.

When no secret needs masking and the tree holds only directories and regular files, it is moved
instead of copied: one rename instead of a copy per file. The trial's processes are gone by then
(the runner stops the environment first), so nothing can plant a link after the check.
"""

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from envloop.environments.instance import walk_tree

MASK = b"***"
_CHUNK = 1024 * 1024


def mask_text(text: str, secrets: Iterable[str]) -> str:
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, MASK.decode())
    return text


def _mask_bytes(data: bytes, secrets: list[bytes]) -> bytes:
    for secret in secrets:
        data = data.replace(secret, MASK)
    return data


def _copy_masked(source_fd: int, target: Path, secrets: list[bytes]) -> None:
    # Text that may still complete a secret is held back until the next chunk arrives.
    keep = max((len(s) for s in secrets), default=1) - 1
    carry = b""
    with os.fdopen(source_fd, "rb") as source, target.open("wb") as out:
        while chunk := source.read(_CHUNK):
            buffer = _mask_bytes(carry + chunk, secrets)
            split = max(0, len(buffer) - keep)
            out.write(buffer[:split])
            carry = buffer[split:]
        out.write(_mask_bytes(carry, secrets))


def _is_real_directory(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def plain_tree(source: Path, max_entries: int | None = None) -> bool | None:
    """True when `source` is a directory holding only directories and regular files, False when
    it is not (a link, a device, unreadable), None when it has more than `max_entries` entries."""
    if not _is_real_directory(source):
        return False
    try:
        for seen, entry in enumerate(walk_tree(source), start=1):
            if not (entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False)):
                return False
            if max_entries is not None and seen > max_entries:
                return None
    except OSError:
        return False
    return True


def move_plain_tree(
    source: Path, target: Path, secrets: Iterable[str], max_entries: int | None = None
) -> bool:
    """Move a tree of plain files into place when no secret needs masking; False (nothing moved)
    when it must be copied instead (secrets, links, more than `max_entries`, another file system)."""
    if any(secrets) or plain_tree(source, max_entries) is not True:
        return False
    try:
        source.rename(target)
    except OSError:
        return False
    return True


def keep_tree(source: Path, target: Path, secrets: Iterable[str]) -> None:
    """Keep `source` at `target`: moved when that is safe, else copied with secrets masked."""
    secrets = list(secrets)
    if not move_plain_tree(source, target, secrets):
        copy_tree_masked(source, target, secrets)


def copy_tree_masked(source: Path, target: Path, secrets: Iterable[str]) -> int:
    """Copy the regular files under `source` to `target`; returns how many files were kept."""
    encoded = sorted({s.encode() for s in secrets if s}, key=len, reverse=True)
    copied = 0
    if not _is_real_directory(source):
        return 0
    for dirpath, dirnames, filenames in os.walk(source):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if not (here / d).is_symlink()]
        for name in filenames:
            path = here / name
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                continue
            destination = target / path.relative_to(source)
            destination.parent.mkdir(parents=True, exist_ok=True)
            _copy_masked(fd, destination, encoded)
            copied += 1
    return copied
