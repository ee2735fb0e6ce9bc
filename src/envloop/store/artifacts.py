"""The artifact store: frozen task archives (content-addressed) and each trial's kept files.

Tasks are stored as deterministic archives keyed by digest, and unpacked once into a read-only cache
that runners copy from. Editing a source directory after a push can never change a revision.
"""

import os
import shutil
import tempfile
from pathlib import Path

from pydantic import BaseModel

from envloop.tasks.archive import pack_task, safe_extract

STRUCTURED_RESULT = "verifier/result.json"
"""Where a trial's declared structured result is kept, relative to its artifacts."""


class ArtifactInfo(BaseModel):
    path: str
    size: int


class ArtifactNotFoundError(LookupError):
    pass


def _hex(digest: str) -> str:
    return digest.split(":", 1)[-1]


class ArtifactStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        for sub in ("tasks", "task-cache", "trials", "staging"):
            (root / sub).mkdir(parents=True, exist_ok=True)

    def task_archive(self, digest: str) -> Path:
        return self.root / "tasks" / f"{_hex(digest)}.tar.gz"

    def put_task(self, digest: str, source: Path) -> None:
        target = self.task_archive(digest)
        if target.exists():
            return
        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".part")
        os.close(fd)
        try:
            pack_task(source, Path(tmp))
            Path(tmp).replace(target)
        finally:
            Path(tmp).unlink(missing_ok=True)

    def task_dir(self, digest: str) -> Path:
        """The unpacked frozen task; unpacked on first use, atomically, so concurrent workers agree."""
        target = self.root / "task-cache" / _hex(digest)
        if target.is_dir():
            return target
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".unpack-"))
        try:
            safe_extract(self.task_archive(digest), staging / "task")
            try:
                (staging / "task").rename(target)
            except OSError:
                if not target.is_dir():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return target

    def trial_dir(self, trial_id: str) -> Path:
        return self.root / "trials" / trial_id

    def staging_dir(self, run_id: str) -> Path:
        """Where one run of a trial keeps its files until its result is recorded."""
        return self.root / "staging" / run_id

    def publish(self, run_id: str, trial_id: str) -> None:
        """Make a run's staged files the trial's artifacts, replacing an earlier run's. Only the run
        whose result was recorded calls this; a stale run's files are discarded instead."""
        staged = self.staging_dir(run_id)
        target = self.trial_dir(trial_id)
        if target.exists():
            old = self.root / "staging" / f".replaced-{run_id}"
            target.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        if staged.exists():
            staged.rename(target)

    def discard(self, run_id: str) -> None:
        shutil.rmtree(self.staging_dir(run_id), ignore_errors=True)

    def staged_runs(self) -> list[str]:
        """Run ids with staged files (a worker may have died between recording and publishing)."""
        return [p.name for p in (self.root / "staging").iterdir() if not p.name.startswith(".")]

    def list_trial(self, trial_id: str) -> list[ArtifactInfo]:
        base = self.trial_dir(trial_id)
        if not base.is_dir():
            return []
        return [
            ArtifactInfo(path=p.relative_to(base).as_posix(), size=p.stat().st_size)
            for p in sorted(base.rglob("*"))
            if p.is_file() and not p.is_symlink()
        ]

    def trial_file(self, trial_id: str, relpath: str) -> Path:
        base = self.trial_dir(trial_id).resolve()
        candidate = (base / relpath).resolve()
        if not candidate.is_relative_to(base) or not candidate.is_file():
            raise ArtifactNotFoundError(f"trial {trial_id} has no artifact {relpath!r}")
        return candidate
