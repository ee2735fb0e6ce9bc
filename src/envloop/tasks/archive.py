"""Task archives: deterministic packing, and extraction into place that leaves nothing behind.

Packing is deterministic (entries sorted, timestamps and owners fixed, gzip header without a name or
time) so that identical task content always gives identical archive bytes.

Extraction unpacks into a temporary directory beside its destination (archive_unpacking.py, which
checks every entry: archives come from users and registries) and renames that directory into place
only when every entry was checked and written; on refusal it is removed, so a refused archive leaves
nothing behind.
"""

import gzip
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from envloop.tasks.archive_unpacking import unpack_into
from envloop.tasks.digest import task_entries
from envloop.tasks.harbor import load_harbor_task
from envloop.tasks.model import HarborTask

DEFAULT_MAX_BYTES = 1 << 30
DEFAULT_MAX_ENTRIES = 100_000


def pack_task(root: Path, dest: Path) -> None:
    """Write the task at `root` as a reproducible `.tar.gz` at `dest` (paths relative to `root`)."""
    entries = task_entries(root)
    dest.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with (
            os.fdopen(handle, "wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz,
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
        ):
            for entry in entries:
                info = tarfile.TarInfo(entry.path)
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if entry.kind == "link":
                    info.type = tarfile.SYMTYPE
                    info.linkname = entry.link_target or ""
                    info.mode = 0o777
                    tar.addfile(info)
                    continue
                info.mode = 0o755 if entry.executable else 0o644
                info.size = entry.source.stat().st_size
                with entry.source.open("rb") as content:
                    tar.addfile(info, content)
        tmp.replace(dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def safe_extract(
    archive: Path,
    dest: Path,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> None:
    """Extract a `.tar`, `.tar.gz`/`.tgz` or `.zip` into `dest`, which must not exist yet.

    Raises TaskFormatError, leaving nothing behind, for any entry that could write outside `dest`,
    any special file, or an archive above `max_bytes` of content or `max_entries` entries.
    """
    if dest.exists() or dest.is_symlink():
        raise FileExistsError(f"{dest}: already exists")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.extract-", dir=dest.parent))
    try:
        unpack_into(archive, tmp, max_bytes, max_entries)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def extract_shared(
    archive: Path,
    target: Path,
    check: Callable[[Path], None] | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> Path:
    """`target` as `archive` unpacked, for a cache that concurrent processes fill: unpacked into a
    private directory beside it, given to `check` (which raises to refuse it), then renamed into
    place. A process that loses the race to rename uses the copy that won.

    The staging directory is the unpacked task itself, so a task costs one directory made and one
    rename on the way (a worker unpacks every distinct task of a job once)."""
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".unpack-"))
    try:
        unpack_into(archive, staging, max_bytes, max_entries)
        if check is not None:
            check(staging)
        try:
            staging.rename(target)
        except OSError:
            if not target.is_dir():
                raise
        else:
            return target
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(staging, ignore_errors=True)
    return target


def extract_task_archive(
    archive: Path,
    dest: Path,
    *,
    name: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> HarborTask:
    """Extract an archived task into `dest` and load it; nothing is left in `dest` if either fails.

    The task may sit at the archive's top level (as `pack_task` writes it) or inside one top-level
    folder (as most hand-made archives do); in the latter case that folder is the task root.
    """
    safe_extract(archive, dest, max_bytes=max_bytes, max_entries=max_entries)
    try:
        root = dest
        children = list(dest.iterdir())
        if not (dest / "task.toml").exists() and len(children) == 1 and children[0].is_dir():
            root = children[0]
        return load_harbor_task(root, name=name)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
