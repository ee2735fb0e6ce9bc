"""Reading a trial's kept files a window at a time: logs and artifacts can be far larger than a
page should carry, so a reader asks for `limit` bytes from `offset` and pages on.

A window never splits a UTF-8 character: its end moves back to the start of a character, and the
next window starts there. Bytes that are not UTF-8 show as the replacement character.
"""

from datetime import UTC, datetime
from typing import BinaryIO

from pydantic import BaseModel, Field

from envloop.errors import UserError
from envloop.services.context import Context
from envloop.services.trial_reads import trial_row

PUBLISHING_SEC = 60.0
"""A trial's files are published just after its result is recorded; this long after it ended, a
file it has not got was never kept."""


def surely_published(finished_at: datetime | None) -> bool:
    """Whether a trial (or a job) that ended at `finished_at` has every file it will ever have."""
    return finished_at is not None and (datetime.now(UTC) - finished_at).total_seconds() > PUBLISHING_SEC


WINDOW = 64 * 1024
MAX_WINDOW = 1024 * 1024
_SNIFF = 8192


class TextWindow(BaseModel):
    path: str
    size: int = Field(description="the whole file's size in bytes")
    offset: int
    text: str
    next_offset: int | None = Field(description="where the next window starts; None at the end")
    binary: bool = Field(description="the file looks binary (a NUL byte near its start): no text given")


def read_window(ctx: Context, trial_id: str, path: str, offset: int = 0, limit: int = WINDOW) -> TextWindow:
    """`limit` bytes of the trial's kept file `path` from `offset` (an unknown path raises)."""
    if offset < 0 or not 0 < limit <= MAX_WINDOW:
        raise UserError(f"offset must be at least 0 and limit between 1 and {MAX_WINDOW}")
    trial_row(ctx, trial_id)
    file = ctx.artifacts.trial_file(trial_id, path)
    with file.open("rb") as handle:
        size = handle.seek(0, 2)
        handle.seek(0)
        binary = b"\0" in handle.read(_SNIFF)
        if binary:
            return TextWindow(path=path, size=size, offset=0, text="", next_offset=None, binary=True)
        start = _char_start(handle, min(offset, size))
        handle.seek(start)
        chunk = handle.read(limit + 4)
    end = len(chunk) if start + len(chunk) >= size else _boundary(chunk, limit)
    text = chunk[:end].decode("utf-8", errors="replace")
    following = start + end
    return TextWindow(
        path=path,
        size=size,
        offset=start,
        text=text,
        next_offset=following if following < size else None,
        binary=False,
    )


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _boundary(chunk: bytes, limit: int) -> int:
    """The largest end <= limit that does not cut a UTF-8 character (at most 3 bytes back)."""
    end = min(limit, len(chunk))
    for back in range(4):
        if end - back <= 0:
            break
        if end - back >= len(chunk) or not _is_continuation(chunk[end - back]):
            return end - back
    return end


def _char_start(handle: BinaryIO, offset: int) -> int:
    """Move `offset` back to the first byte of the character it falls in."""
    for back in range(4):
        position = offset - back
        if position <= 0:
            return 0
        handle.seek(position)
        byte = handle.read(1)
        if not byte or not _is_continuation(byte[0]):
            return position
    return offset
