"""Captured output bounded while it is written: the first and the last bytes of a stream are kept,
what lies between is dropped as it arrives and counted.

A command inside a trial can write without end (`cat /dev/zero`). Cutting its capture file after
the command ended would let it take the host's disk (and the time to write it) first, so every
stream a worker captures goes through a `BoundedWriter`: the first `head` bytes go to the capture
file, later ones into a ring of `tail` bytes in a nameless scratch file, and `finish` appends one
line saying how many bytes were dropped, then the ring in order. Nothing is ever held in memory
beyond the chunk being written, and the disk holds at most `head + tail` (plus the ring) per stream.
"""

import asyncio
import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

from envloop.environments.keeping import MAX_KEPT_FILE_BYTES
from envloop.environments.procs import read_tail

_NOTE_ROOM = 1024
CAPTURE_HEAD_BYTES = MAX_KEPT_FILE_BYTES // 2 - _NOTE_ROOM
CAPTURE_TAIL_BYTES = MAX_KEPT_FILE_BYTES // 2 - _NOTE_ROOM
"""Head and tail kept of one stream: with the note between them a capture stays within what a
trial keeps of one file (keeping.py), so keeping it never cuts it a second time."""
_CHUNK = 1 << 20
_PIPE_CHUNK = 256 << 10


class Sink(Protocol):
    """Where a stream's bytes are written as they arrive."""

    def write(self, data: bytes, /) -> int: ...


def dropped_note(dropped: int) -> bytes:
    return f"\n[envloop: {dropped:,} bytes of this output were dropped here]\n".encode()


class BoundedWriter:
    """Writes to `file` (open, empty, the caller's to close) keeping its first `head` and last
    `tail` bytes. Call `finish` once the stream has ended; `file` then holds what was kept."""

    def __init__(
        self, file: "BinaryIO | Capture", *, head: int = CAPTURE_HEAD_BYTES, tail: int = CAPTURE_TAIL_BYTES
    ) -> None:
        self.file = file
        self._head = head
        self._tail = tail
        self._ring: BinaryIO | None = None
        self._ring_written = 0
        self.written = 0
        """Bytes the stream carried, kept or not."""
        self.dropped = 0
        """Bytes dropped from its middle (known once `finish` ran)."""
        self._finished = False

    def write(self, data: bytes) -> int:
        if self._finished:
            return len(data)  # a stream that outlives its command (a daemon): nothing more is kept
        size = len(data)
        room = self._head - self.written
        self.written += size
        if room > 0:
            self.file.write(data[:room])
            data = data[room:]
        if data:
            self._to_ring(data)
        return size

    def _to_ring(self, data: bytes) -> None:
        if self._tail <= 0:
            self._ring_written += len(data)
            return
        if self._ring is None:
            self._ring = tempfile.TemporaryFile()  # noqa: SIM115 - closed by finish
        if len(data) > self._tail:
            self._ring_written += len(data) - self._tail
            data = data[-self._tail :]
        while data:
            at = self._ring_written % self._tail
            piece = data[: self._tail - at]
            os.pwrite(self._ring.fileno(), piece, at)
            self._ring_written += len(piece)
            data = data[len(piece) :]

    def flush(self) -> None:
        self.file.flush()

    def tail(self) -> tuple[str, bool]:
        """The last bytes kept, decoded, and whether they are all of the stream (`read_tail`)."""
        return self.file.tail() if isinstance(self.file, Capture) else read_tail(self.file)

    def finish(self) -> int:
        """Append the note and the kept tail to `file`; the bytes dropped. Idempotent."""
        if self._finished:
            return self.dropped
        self._finished = True
        ring, kept = self._ring, min(self._ring_written, self._tail)
        self.dropped = self._ring_written - kept
        if self.dropped:
            self.file.write(dropped_note(self.dropped))
        if ring is not None:
            with ring:
                start = self._ring_written % self._tail if self._ring_written > self._tail else 0
                for offset, length in ((start, kept - start), (0, start)):
                    self._copy_ring(ring, offset, length)
        self.file.flush()
        return self.dropped

    def _copy_ring(self, ring: BinaryIO, offset: int, length: int) -> None:
        while length > 0:
            piece = os.pread(ring.fileno(), min(_CHUNK, length), offset)
            if not piece:
                return
            self.file.write(piece)
            offset += len(piece)
            length -= len(piece)


class PipePump:
    """Reads the pipe `fd` (its read end, ours to close) on the event loop into `sink` as data
    arrives, one chunk per wake-up, until the pipe ends or `close` is called."""

    def __init__(self, fd: int, sink: Sink) -> None:
        self._fd = fd
        self._sink = sink
        self._loop = asyncio.get_running_loop()
        self.ended = self._loop.create_future()
        os.set_blocking(fd, False)
        self._loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, _PIPE_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self._sink.write(data)
        else:
            self.close()

    def close(self) -> None:
        """Stop reading and close the pipe (idempotent); a writer still holding it gets EPIPE."""
        if self._fd < 0:
            return
        self._loop.remove_reader(self._fd)
        os.close(self._fd)
        self._fd = -1
        if not self.ended.done():
            self.ended.set_result(None)


class Capture:
    """A command's capture file, made when its first byte arrives: the worker's file `path` (never
    inside the instance; its directory is made then when missing), or a nameless temporary one when
    the caller keeps only the result's tail. A stream that printed nothing leaves no file: a
    trivial trial's four empty streams were four files and a directory made, kept and listed for
    nothing, and every file made costs the store's file system an inode. A file already at `path`
    (an earlier run's, a file the caller follows) is emptied at once, as opening it would have."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.file: BinaryIO | None = None
        if path is not None:
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                os.truncate(path, 0)

    def write(self, data: bytes, /) -> int:
        if self.file is None:
            self.file = self._open()
        return self.file.write(data)

    def _open(self) -> BinaryIO:
        if self.path is None:
            return tempfile.TemporaryFile()
        try:
            return self.path.open("w+b", buffering=0)
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return self.path.open("w+b", buffering=0)

    def flush(self) -> None:
        if self.file is not None:
            self.file.flush()

    def tail(self) -> tuple[str, bool]:
        """The stream's last bytes, decoded, and whether that is all of it (see `read_tail`)."""
        return ("", True) if self.file is None else read_tail(self.file)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


@contextlib.contextmanager
def capture_file(path: Path | None) -> Iterator[Capture]:
    """A `Capture` of `path`, its file closed on the way out."""
    capture = Capture(path)
    try:
        yield capture
    finally:
        capture.close()
