"""Reading a kept trajectory a step at a time, never whole: what the API, the console and the ATIF
export do, so that a trajectory of any size costs the server one step's memory.

Opening a `trajectory.json` scans it once for where each step lies (`Outline`: the document's other
fields, and each step's byte range), reading it in chunks and parsing nothing but those fields;
a step is then read and parsed on its own. Outlines are small (two integers per step) and kept for
the files seen last, keyed by the file's identity (size, modification time, inode): a running
trial's trajectory is replaced by a rename, which gives a new key.

Two layouts are read. The one written now (`trajectories.files`) has a step per line. The one
written before (indented JSON) has each step between a line `  {` and a line `  }`, as the
serialiser indents them; a step of it larger than `MAX_STEP_BYTES`, which the writer no longer
keeps, reads as a `cut` step naming its size (the file itself streams whole as an artifact). A
file in neither layout is read whole only when it is small.
"""

import contextlib
import io
import re
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from pydantic import TypeAdapter, ValidationError

from envloop.core.trajectory import CutStep, Step, Trajectory
from envloop.trajectories.caps import MAX_STEP_BYTES
from envloop.trajectories.files import STEPS_CLOSING, STEPS_OPENING, masked_json
from envloop.wire.trials import PAGE_STEPS

PAGE_BYTES = 4 * 1024 * 1024
"""The most step JSON one page reads (a page has at least one step)."""
_CHUNK = 1024 * 1024
_HEAD_LIMIT = 1024 * 1024
_WHOLE_LIMIT = 16 * 1024 * 1024
_CACHE_SIZE = 64
_STEP: TypeAdapter[Step] = TypeAdapter(Step)
_AT = re.compile(rb'"at":\s*"([^"]{1,64})"')
_EDGE = 16


class TrajectoryFormatError(ValueError):
    """The file is not a trajectory that can be read: the message says why, as what follows the
    file's name ("is not a valid trajectory (…)"), without its path."""


@dataclass(frozen=True)
class Outline:
    """A trajectory without its steps, and where each step lies in its bytes."""

    head: Trajectory
    starts: array  # type: ignore[type-arg]  # array('q') of byte offsets
    ends: array  # type: ignore[type-arg]
    path: Path
    data: bytes | None = None
    """The document itself, for a small file in neither layout (re-laid out in memory)."""

    @property
    def total(self) -> int:
        return len(self.starts)

    def size(self, index: int) -> int:
        return int(self.ends[index] - self.starts[index])

    def step(self, index: int) -> Step:
        if not 0 <= index < self.total:
            raise IndexError(index)
        size = self.size(index)
        if size > MAX_STEP_BYTES:
            return self._too_large(index, size)
        raw = self._read(int(self.starts[index]), size)
        try:
            step = _STEP.validate_json(raw)
        except ValidationError as exc:
            raise _invalid(exc, f"has a step {index} that is not valid") from None
        step.index = index
        return step

    def steps(self, offset: int, limit: int = PAGE_STEPS, budget: int = PAGE_BYTES) -> list[Step]:
        """Up to `limit` steps from `offset`, stopping before `budget` bytes of step JSON (one at least)."""
        found: list[Step] = []
        used = 0
        for index in range(max(0, offset), min(self.total, max(0, offset) + max(0, limit))):
            used += min(self.size(index), MAX_STEP_BYTES)
            if found and used > budget:
                break
            found.append(self.step(index))
        return found

    def iter_steps(self, start: int = 0) -> Iterator[Step]:
        for index in range(max(0, start), self.total):
            yield self.step(index)

    def _read(self, start: int, size: int) -> bytes:
        if self.data is not None:
            return self.data[start : start + size]
        with self.path.open("rb") as handle:
            handle.seek(start)
            return handle.read(size)

    def _too_large(self, index: int, size: int) -> CutStep:
        found = _AT.search(self._read(int(self.starts[index]), 512))
        step = CutStep(
            index=index,
            steps=1,
            bytes=size,
            note=f"step {index + 1} is {size} bytes, more than the {MAX_STEP_BYTES} a step is read "
            "with: download trajectory.json to see it",
        )
        if found is not None:
            with contextlib.suppress(ValidationError):
                step.at = _TIME.validate_python(found.group(1).decode())
        return step


_TIME: TypeAdapter[datetime] = TypeAdapter(datetime)

_cache: OrderedDict[tuple[str, int, int, int], Outline] = OrderedDict()
_lock = threading.Lock()


def open_outline(path: Path) -> Outline:
    """The outline of the trajectory at `path`, from memory when the file is unchanged."""
    info = path.stat()
    key = (str(path), info.st_size, info.st_mtime_ns, info.st_ino)
    with _lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    outline = _scan(path, info.st_size)
    with _lock:
        _cache[key] = outline
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return outline


def _scan(path: Path, size: int) -> Outline:
    with path.open("rb") as handle:
        first = handle.read(len(b'{"schema_version"'))
        handle.seek(0)
        try:
            if first == b'{"schema_version"':
                return _scan_lines(handle, path)
            if first.startswith(b"{\n"):
                return _scan_indented(handle, path)
        except _NotThisLayout:
            pass
    return _whole(path, size)


class _NotThisLayout(Exception):
    """The file does not follow the layout it seemed to: it is read as one that follows none."""


def _head(raw: bytes) -> Trajectory:
    if len(raw) > _HEAD_LIMIT:
        raise TrajectoryFormatError("has fields other than its steps too large to read")
    try:
        return Trajectory.model_validate_json(raw)
    except ValidationError as exc:
        raise _invalid(exc, "is not a valid trajectory") from None


def _invalid(exc: ValidationError, what: str) -> TrajectoryFormatError:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "document"
    return TrajectoryFormatError(f"{what} ({where}: {first['msg']})")


def _scan_lines(handle: BinaryIO, path: Path, data: bytes | None = None) -> Outline:
    """The layout written now: a head line ending in `"steps":[`, a step per line, `]}`."""
    starts, ends = array("q"), array("q")
    head_end: int | None = None
    for start, end, first, last in _lines(handle):
        if head_end is None:
            if not last.endswith(STEPS_OPENING.encode()):
                raise _NotThisLayout
            head_end = end
        elif first.startswith(STEPS_CLOSING.encode()):
            break
        else:
            starts.append(start)
            ends.append(end - 1 if last.endswith(b",") else end)
    if head_end is None:
        raise _NotThisLayout
    handle.seek(0)
    head = _head(handle.read(min(head_end, _HEAD_LIMIT + 1)) + STEPS_CLOSING.encode())
    return Outline(head=head, starts=starts, ends=ends, path=path, data=data)


def _scan_indented(handle: BinaryIO, path: Path) -> Outline:
    """The layout written before: indented JSON, each step between `  {` and `  }` lines."""
    starts, ends = array("q"), array("q")
    head_end: int | None = None
    for start, end, first, _ in _lines(handle):
        line = first if end - start <= _EDGE else b""
        if head_end is None:
            if first.startswith(b' "steps": ['):
                head_end = start
        elif line == b"  {":
            starts.append(start)
        elif line in (b"  }", b"  },"):
            ends.append(start + 3)
        elif line.startswith(b" ]"):
            break
    if head_end is None or len(starts) != len(ends):
        raise _NotThisLayout
    handle.seek(0)
    head = _head(handle.read(min(head_end, _HEAD_LIMIT + 1)) + b' "steps": []\n}')
    return Outline(head=head, starts=starts, ends=ends, path=path)


def _whole(path: Path, size: int) -> Outline:
    """A small trajectory in neither layout (written by hand, or by another tool): parsed whole
    once and laid out again in memory."""
    if size > _WHOLE_LIMIT:
        raise TrajectoryFormatError(f"is in no layout that can be read a step at a time ({size} bytes)")
    try:
        trajectory = Trajectory.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        raise _invalid(exc, "is not a valid trajectory") from None
    data = masked_json(trajectory, ()).encode()
    return _scan_lines(io.BytesIO(data), path, data)


def _lines(handle: BinaryIO) -> Iterator[tuple[int, int, bytes, bytes]]:
    """(start, end, first bytes, last bytes) of each line, read in chunks: a line of any length
    costs no more memory than a chunk."""
    offset = line_start = 0
    first = last = b""
    while chunk := handle.read(_CHUNK):
        position = 0
        while True:
            newline = chunk.find(b"\n", position)
            piece = chunk[position : newline if newline >= 0 else len(chunk)]
            if len(first) < _EDGE:
                first += piece[: _EDGE - len(first)]
            last = (last + piece[-_EDGE:])[-_EDGE:]
            if newline < 0:
                break
            yield line_start, offset + newline, first, last
            line_start, first, last, position = offset + newline + 1, b"", b"", newline + 1
        offset += len(chunk)
    if line_start < offset:
        yield line_start, offset, first, last
