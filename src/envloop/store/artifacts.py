"""The artifact store: frozen task archives (content-addressed) and each trial's kept files.

Tasks are stored as deterministic archives keyed by digest, and unpacked once into a read-only cache
that runners copy from. Editing a source directory after a push can never change a revision.

The store is a local directory (ENVLOOP_HOME/artifacts by default) or, for workers on several
machines, any fsspec URL (`ENVLOOP_ARTIFACTS=s3://bucket/prefix`). With a remote store the local
directory is this machine's cache and staging area: task archives are downloaded once per digest
(and checked against it) before they are unpacked, a run's files are staged locally while it runs
and uploaded when its result has been recorded, and kept files are read through a local copy
named after the remote object's version, so a replaced file is never served stale.

Remote layout: `tasks/<hex>.tar.gz`, `trials/<trial id>/<kept path>` and
`datasets/<dataset id>.origins.json` (where a pulled revision's tasks came from).
"""

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from envloop.home import private_dir
from envloop.store.remote_files import ArtifactStoreUnavailableError, RemoteFolder, is_remote_url

if TYPE_CHECKING:
    from envloop.wire.trials import ArtifactInfo

STRUCTURED_RESULT = "verifier/result.json"
"""Where a trial's declared structured result is kept, relative to its artifacts."""
SMALL_ARCHIVE_BYTES = 64 * 1024
SMALL_TASK_BYTES = 1024 * 1024
SMALL_TASK_ENTRIES = 256
"""A task archive this small is unpacked where it is asked for (`small_task_dir`): a bound on the
work, decompression included, that a hostile archive can put on a worker's event loop."""

__all__ = [
    "STRUCTURED_RESULT",
    "ArtifactIntegrityError",
    "ArtifactNotFoundError",
    "ArtifactStore",
    "ArtifactStoreUnavailableError",
    "open_artifact_store",
]


class ArtifactNotFoundError(LookupError):
    pass


class ArtifactIntegrityError(RuntimeError):
    """A downloaded task archive does not hold the content its digest names."""


def _hex(digest: str) -> str:
    return digest.split(":", 1)[-1]


def _kept_path(relpath: str) -> str | None:
    """`relpath` as a clean relative POSIX path, or None if it could name something outside."""
    path = PurePosixPath(relpath)
    if path.is_absolute() or not path.parts or any(part in ("..", ".") for part in path.parts):
        return None
    return path.as_posix()


def _single_name(trial_id: str) -> bool:
    return "/" not in trial_id and _kept_path(trial_id) == trial_id


def regular_files(root: Path) -> list[tuple[Path, str]]:
    """Regular files under `root` (never through a link) with their relative POSIX paths."""
    found = []
    for folder, dirs, files in os.walk(root):
        base = Path(folder)
        dirs[:] = [d for d in dirs if not (base / d).is_symlink()]
        for name in files:
            path = base / name
            if path.is_file() and not path.is_symlink():
                found.append((path, path.relative_to(root).as_posix()))
    return sorted(found, key=lambda item: item[1])


def _sorted_files(directory: Path, prefix: str) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """The regular files below `directory` (never through a link) with their relative paths, in the
    order of those paths, one directory listing in memory at a time (a folder sorts as its name
    followed by "/", which is where its files fall among the paths)."""
    with os.scandir(directory) as listing:
        entries = sorted(
            ((entry.name + "/" if entry.is_dir(follow_symlinks=False) else entry.name), entry)
            for entry in listing
            if not entry.is_symlink()
        )
    for key, entry in entries:
        if key.endswith("/"):
            yield from _sorted_files(Path(entry.path), prefix + key)
        elif entry.is_file(follow_symlinks=False):
            yield prefix + entry.name, entry


class ArtifactStore:
    def __init__(self, root: Path, remote: RemoteFolder | None = None) -> None:
        self.root = root
        self.remote = remote
        private_dir(root)  # the hidden tests and what agents left: for this user only
        for sub in ("tasks", "task-cache", "trials", "staging", "trial-cache", "datasets"):
            (root / sub).mkdir(parents=True, exist_ok=True)

    @property
    def location(self) -> str:
        """Where the shared files live: the remote URL, or the local directory."""
        return self.remote.url if self.remote else str(self.root)

    def task_archive(self, digest: str) -> Path:
        """The archive's local path (for a remote store, this machine's copy of it)."""
        return self.root / "tasks" / f"{_hex(digest)}.tar.gz"

    def put_task(self, digest: str, source: Path) -> None:
        from envloop.tasks.archive import pack_task  # noqa: PLC0415 - the task parsers: not for reads

        target = self.task_archive(digest)
        if not target.exists():
            fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".part")
            os.close(fd)
            try:
                pack_task(source, Path(tmp))
                Path(tmp).replace(target)
            finally:
                Path(tmp).unlink(missing_ok=True)
        key = f"tasks/{target.name}"
        if self.remote is not None and not self.remote.exists(key):
            self.remote.upload([(target, key)])

    def put_dataset_origins(self, dataset_id: str, document: bytes) -> None:
        """Keep where a revision's tasks came from (written once, when the revision is created)."""
        target = self.root / "datasets" / f"{dataset_id}.origins.json"
        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".part")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(document)
            Path(tmp).replace(target)
        finally:
            Path(tmp).unlink(missing_ok=True)
        if self.remote is not None:
            self.remote.upload([(target, f"datasets/{target.name}")])

    def dataset_origins(self, dataset_id: str) -> bytes | None:
        """What `put_dataset_origins` kept for the revision, or None (a revision that was pushed)."""
        target = self.root / "datasets" / f"{dataset_id}.origins.json"
        if not target.exists() and self.remote is not None:
            fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".part")
            os.close(fd)
            try:
                self.remote.download(f"datasets/{target.name}", Path(tmp))
                Path(tmp).replace(target)
            except FileNotFoundError:
                return None
            finally:
                Path(tmp).unlink(missing_ok=True)
        try:
            return target.read_bytes()
        except FileNotFoundError:
            return None

    def _task_cache(self, digest: str) -> Path:
        """Where the task of `digest` is kept unpacked on this machine."""
        return self.root / "task-cache" / _hex(digest)

    def small_task_dir(self, digest: str) -> Path | None:
        """The unpacked task when this machine has it or can unpack it at once: its archive is in
        this (local) store and small (`SMALL_ARCHIVE_BYTES` packed, within `SMALL_TASK_BYTES` and
        `SMALL_TASK_ENTRIES` unpacked), which costs less than handing the work to a thread. None:
        use `task_dir`, off the event loop. An archive refused for anything but its size raises
        TaskFormatError as `task_dir` would."""
        target = self._task_cache(digest)
        if target.is_dir():
            return target
        archive = self.task_archive(digest)
        try:
            if self.remote is not None or archive.stat().st_size > SMALL_ARCHIVE_BYTES:
                return None
        except FileNotFoundError:
            return None
        from envloop.tasks.archive import extract_shared  # noqa: PLC0415
        from envloop.tasks.archive_unpacking import ArchiveTooLarge  # noqa: PLC0415

        try:
            return extract_shared(archive, target, max_bytes=SMALL_TASK_BYTES, max_entries=SMALL_TASK_ENTRIES)
        except ArchiveTooLarge:
            return None

    def task_dir(self, digest: str) -> Path:
        """The unpacked frozen task; unpacked on first use, atomically, so concurrent workers agree.
        Raises ArtifactStoreUnavailableError when a remote store cannot provide the archive."""
        target = self._task_cache(digest)
        if target.is_dir():
            return target
        from envloop.tasks.archive import extract_shared  # noqa: PLC0415
        from envloop.tasks.digest import task_digest  # noqa: PLC0415

        archive = self._local_archive(digest)
        remote = self.remote

        def holds_its_digest(task: Path) -> None:
            if remote is not None and task_digest(task) != digest:
                archive.unlink(missing_ok=True)
                raise ArtifactIntegrityError(
                    f"task archive {digest} from {remote.url} does not hold the content of its digest"
                )

        return extract_shared(archive, target, holds_its_digest)

    def _local_archive(self, digest: str) -> Path:
        archive = self.task_archive(digest)
        if self.remote is None or archive.exists():
            return archive
        fd, tmp = tempfile.mkstemp(dir=archive.parent, suffix=".part")
        os.close(fd)
        try:
            self.remote.download(f"tasks/{archive.name}", Path(tmp))
            Path(tmp).replace(archive)
        except FileNotFoundError:
            raise ArtifactStoreUnavailableError(
                f"task archive {digest} is not in the artifact store {self.remote.url}"
            ) from None
        finally:
            Path(tmp).unlink(missing_ok=True)
        return archive

    def trial_dir(self, trial_id: str) -> Path:
        """A trial's kept files in a local store (with a remote store they live at its URL)."""
        return self.root / "trials" / trial_id

    def staging_dir(self, run_id: str) -> Path:
        """Where one run of a trial keeps its files until its result is recorded."""
        return self.root / "staging" / run_id

    def publish(self, run_id: str, trial_id: str) -> None:
        """Make a run's staged files the trial's artifacts, replacing an earlier run's. Only the run
        whose result was recorded calls this; a stale run's files are discarded instead. With a
        remote store the staged files stay until they are uploaded (ArtifactStoreUnavailableError
        otherwise), so a later call can publish them."""
        staged = self.staging_dir(run_id)
        try:
            handle = os.open(staged, os.O_RDONLY)  # a directory, as a rule; whatever it is, it moves
        except FileNotFoundError:
            return  # published already, by another worker on this machine
        # Two workers on this machine may publish one run at once (the one that recorded it, and
        # one starting up that finds it staged and recorded). A lock on the staged directory
        # itself orders them, and the second then finds it gone and leaves the first's work alone.
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            if staged.exists():
                self._publish_staged(staged, trial_id, run_id)
        finally:
            os.close(handle)

    def _publish_staged(self, staged: Path, trial_id: str, run_id: str) -> None:
        if self.remote is not None:
            self._upload(staged, trial_id)
            shutil.rmtree(staged, ignore_errors=True)
            return
        target = self.trial_dir(trial_id)
        if target.exists():
            old = self.root / "staging" / f".replaced-{run_id}"
            target.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        staged.rename(target)

    def _upload(self, staged: Path, trial_id: str) -> None:
        assert self.remote is not None
        prefix = f"trials/{trial_id}"
        files = regular_files(staged) if staged.is_dir() else []
        earlier = self.remote.listing(prefix)
        self.remote.upload((path, f"{prefix}/{rel}") for path, rel in files)
        kept = {rel for _, rel in files}
        self.remote.remove(f"{prefix}/{rel}" for rel in earlier if rel not in kept)

    def discard(self, run_id: str) -> None:
        shutil.rmtree(self.staging_dir(run_id), ignore_errors=True)

    def staged_runs(self) -> list[str]:
        """Run ids with staged files (a worker may have died between recording and publishing)."""
        return [p.name for p in (self.root / "staging").iterdir() if not p.name.startswith(".")]

    def list_trial(self, trial_id: str) -> "list[ArtifactInfo]":
        return self.page_trial(trial_id, 0, None)[0]

    def page_trial(self, trial_id: str, offset: int, limit: int | None) -> "tuple[list[ArtifactInfo], int]":
        """Up to `limit` kept files (all with None) from `offset`, sorted by path, and how many there
        are: a trial that kept 200,000 files is listed a page at a time, each file's size read only
        for its page."""
        from envloop.wire.trials import ArtifactInfo  # noqa: PLC0415 - a read of a job's row needs no trial model

        if self.remote is not None:
            if not _single_name(trial_id):
                return [], 0
            sizes = sorted(self.remote.listing(f"trials/{trial_id}").items())
            end = None if limit is None else offset + limit
            return [ArtifactInfo(path=rel, size=size) for rel, size in sizes[offset:end]], len(sizes)
        base = self.trial_dir(trial_id)
        if not base.is_dir():
            return [], 0
        page: list[ArtifactInfo] = []
        total = 0
        for rel, entry in _sorted_files(base, ""):
            if total >= offset and (limit is None or len(page) < limit):
                page.append(ArtifactInfo(path=rel, size=entry.stat(follow_symlinks=False).st_size))
            total += 1
        return page, total

    def trial_file(self, trial_id: str, relpath: str) -> Path:
        """A local path to the kept file (for a remote store, a copy of its current version)."""
        if self.remote is not None:
            return self._remote_trial_file(trial_id, relpath)
        base = self.trial_dir(trial_id).resolve()
        candidate = (base / relpath).resolve()
        if not candidate.is_relative_to(base) or not candidate.is_file():
            raise ArtifactNotFoundError(f"trial {trial_id} has no artifact {relpath!r}")
        return candidate

    def _remote_trial_file(self, trial_id: str, relpath: str) -> Path:
        assert self.remote is not None
        rel = _kept_path(relpath)
        missing = ArtifactNotFoundError(f"trial {trial_id} has no artifact {relpath!r}")
        if rel is None or not _single_name(trial_id):
            raise missing
        key = f"trials/{trial_id}/{rel}"
        try:
            _, version = self.remote.version(key)
        except FileNotFoundError:
            raise missing from None
        cached = self.root / "trial-cache" / trial_id / version / rel
        if cached.is_file():
            return cached
        cached.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cached.parent, prefix=".", suffix=".part")
        os.close(fd)
        try:
            self.remote.download(key, Path(tmp))
            Path(tmp).replace(cached)
        except FileNotFoundError:
            raise missing from None
        finally:
            Path(tmp).unlink(missing_ok=True)
        return cached


def open_artifact_store(setting: str | None, home: Path) -> ArtifactStore:
    """The store ENVLOOP_ARTIFACTS names: a URL (remote, cached under `home`), a path, or by default
    `home/artifacts`."""
    if setting and is_remote_url(setting):
        return ArtifactStore(home / "artifacts", RemoteFolder(setting))
    if setting:
        return ArtifactStore(Path(setting.removeprefix("file://")).expanduser())
    return ArtifactStore(home / "artifacts")
