"""What an upload operation sends for a local path (`envloop.operations.kinds.Upload`): a file as it is,
or a folder packed as a .tar.gz, each under a name the server accepts.

The pack leaves out what a task's digest ignores (caches, VCS folders) and the owners of files.
"""

import re
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from envloop.errors import UserError

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def upload_stem(name: str) -> str:
    """A file name's stem with only the characters the server accepts in an uploaded name."""
    stem = _UNSAFE.sub("-", name).strip("-.") or "upload"
    return stem[:200]


def pack(root: Path, dest: Path) -> None:
    """Write the folder `root` as the .tar.gz `dest`, the folder itself at its top."""
    from envloop.tasks.digest import IGNORED_DIRS, IGNORED_FILES  # noqa: PLC0415 - only uploads pack

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = Path(info.name).parts
        if any(p in IGNORED_DIRS for p in parts) or parts[-1] in IGNORED_FILES:
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(dest, "w:gz") as tar:
        tar.add(root, arcname=root.name, filter=keep)


@contextmanager
def packed(path: Path) -> Iterator[tuple[str, BinaryIO]]:
    """The name and open contents to send for `path`: a file (as .jsonl), or a folder packed in a
    scratch folder removed afterwards."""
    if not path.exists():
        raise UserError(f"{path}: no such file or directory")
    with tempfile.TemporaryDirectory(prefix="envloop-push-") as tmp:
        if path.is_file():
            upload, filename = path, f"{upload_stem(path.stem)}.jsonl"
        else:
            upload, filename = Path(tmp) / "upload.tar.gz", f"{upload_stem(path.name)}.tar.gz"
            pack(path.resolve(), upload)
        with upload.open("rb") as handle:
            yield filename, handle
