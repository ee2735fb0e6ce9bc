"""How an archive's format is told and its bytes read: a gzipped tar is inflated in one call when it
inflates cleanly, and everything else (a zip or a plain tar whatever its name, trailing bytes, a tar
cut short or with odd sizes inside whole gzip) is read, or refused, as tarfile and zipfile read it."""

import gzip
import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from envloop.tasks.archive import safe_extract
from envloop.tasks.model import TaskFormatError


def _tar_bytes(*members: tuple[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def test_a_zip_or_a_plain_tar_named_tar_gz_is_unpacked_by_what_it_holds(tmp_path: Path) -> None:
    zipped = tmp_path / "zip.tar.gz"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("task.toml", "z")
    plain = tmp_path / "plain.tar.gz"
    plain.write_bytes(_tar_bytes(("task.toml", b"t")))

    safe_extract(zipped, tmp_path / "from-zip")
    safe_extract(plain, tmp_path / "from-tar")

    assert (tmp_path / "from-zip" / "task.toml").read_text() == "z"
    assert (tmp_path / "from-tar" / "task.toml").read_text() == "t"


def test_a_gzipped_tar_followed_by_stray_bytes_is_read_as_before(tmp_path: Path) -> None:
    archive = tmp_path / "t.tar.gz"
    archive.write_bytes(gzip.compress(_tar_bytes(("a/b.txt", b"kept"))) + b"stray bytes after the gzip")

    safe_extract(archive, tmp_path / "out")

    assert (tmp_path / "out" / "a" / "b.txt").read_bytes() == b"kept"


def test_a_whole_gzip_stream_holding_a_cut_short_tar_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "t.tar.gz"
    archive.write_bytes(gzip.compress(_tar_bytes(("a.bin", os.urandom(5000)))[:3000]))

    with pytest.raises(TaskFormatError, match=r"not a readable archive \(unexpected end of data\)"):
        safe_extract(archive, tmp_path / "out")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["t.tar.gz"]


@pytest.mark.parametrize(
    "size",
    [-100_000, -1600],
    ids=["sends the reader before the start", "ends where a slice would wrap round from the end"],
)
def test_a_gzipped_member_of_negative_size_is_read_as_the_streaming_reader_reads_it(
    tmp_path: Path, size: int
) -> None:
    negative = bytearray((size % (1 << 96)).to_bytes(12, "big"))
    negative[0] = 0o377  # base-256, negative
    raw = _tar_bytes(("a.txt", b"hello"), ("b.txt", b""))
    header = bytearray(raw[1024:1536])  # the second member's header
    header[124:136] = negative
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    archive = tmp_path / "t.tar.gz"
    archive.write_bytes(gzip.compress(raw[:1024] + bytes(header) + bytes(2048)))

    safe_extract(archive, tmp_path / "out")

    assert (tmp_path / "out" / "a.txt").read_bytes() == b"hello"
    assert (tmp_path / "out" / "b.txt").read_bytes() == b""
