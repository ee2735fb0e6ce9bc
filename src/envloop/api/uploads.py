"""The server's side of an upload operation (`envloop.operations.kinds.Upload`): the uploaded file saved
in a scratch folder named after it, unpacked with the same hostile-archive checks as any task
archive, and the path the service function reads.

Messages about the files name them as the uploader sent them, not where they were unpacked.
"""

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fastapi import UploadFile

from envloop.api.limits import max_unpacked_bytes
from envloop.errors import UserError
from envloop.tasks.archive import safe_extract
from envloop.tasks.archive_unpacking import length_problem
from envloop.tasks.model import TaskFormatError

_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
_SAFE_STEM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def _split_name(filename: str) -> tuple[str, str]:
    """(stem, suffix) of an uploaded file name, refusing kinds we cannot read."""
    base = Path(filename).name
    problem = length_problem(base, "a file name")
    if problem is not None:
        raise UserError(f"upload {base[:80]!r}…: {problem}")
    for suffix in (".jsonl", *_ARCHIVE_SUFFIXES):
        if base.endswith(suffix) and len(base) > len(suffix):
            stem = base[: -len(suffix)]
            if not _SAFE_STEM.match(stem):
                raise UserError(f"upload name {base!r}: use letters, digits, '.', '_' and '-'")
            return stem, suffix
    raise UserError(f"upload {base!r}: expected a .jsonl file or a .tar.gz, .tgz, .tar or .zip archive")


def _unpack(upload: UploadFile, scratch: Path) -> Path:
    """The path to read: the JSONL file, the archive's single top-level folder, or the unpacked root.

    The uploaded file keeps its name and the unpacked root is named after it, so messages about
    them name what the uploader sent."""
    stem, suffix = _split_name(upload.filename or "")
    received = scratch / f"{stem}{suffix}"
    with received.open("wb") as sink:
        shutil.copyfileobj(upload.file, sink)
    if suffix == ".jsonl":
        return received
    root = scratch / "unpacked" / stem
    safe_extract(received, root, max_bytes=max_unpacked_bytes())
    visible = [p for p in root.iterdir() if not p.name.startswith(".")]
    if not (root / "task.toml").exists() and len(visible) == 1 and visible[0].is_dir():
        return visible[0]
    return root


@contextmanager
def unpacked(upload: UploadFile) -> Iterator[Path]:
    """The uploaded file or folder in a scratch folder, removed afterwards; an error raised while
    unpacking or reading it is a `UserError` naming files as sent."""
    with tempfile.TemporaryDirectory(prefix="envloop-upload-") as tmp:
        scratch = Path(tmp)
        prefix = f"{scratch}/"
        try:
            path = _unpack(upload, scratch)
            prefix = f"{path.parent}/"
            yield path
        except TaskFormatError as exc:
            raise UserError(str(exc).replace(prefix, "")) from None
        except UserError as exc:
            raise type(exc)(str(exc).replace(prefix, "")) from None
