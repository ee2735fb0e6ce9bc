"""Build records and logs under `<artifacts>/builds`, one of each per image key.

An image key is the task's digest, followed by a short hash of the operator's substitutions when
any applied (`sha256:<hex>-<hash>`): the same task built with another substitution map is another
image, with its own record, so a failure recorded under one map never refuses a job under another.
"""

import asyncio
import contextlib
import fcntl
import os
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from envloop.environments.docker.build_settings import BuildNetwork
from envloop.environments.docker.prepare import Substitution

LOG_TAIL_BYTES = 4096
_LOCK_POLL_SEC = 0.2


def key_name(key: str) -> str:
    """The key without its `sha256:` prefix, as file and image tag names use it."""
    return key.split(":", 1)[-1]


class BuildRecord(BaseModel):
    """The last build of one image key, as kept in `builds/<key>.json`."""

    digest: str
    image: str
    status: Literal["built", "failed"]
    reason: str | None = None
    """One line saying why a build failed."""
    image_id: str | None = None
    network: BuildNetwork
    started_at: datetime
    duration_sec: float
    log_tail: str = ""
    substitutions: list[Substitution] = []
    """The operator's substitutions the build applied (ENVLOOP_IMAGE_SUBSTITUTES)."""
    notes: list[str] = []
    """What else the build did differently from a plain `docker build` (a frontend served by the
    daemon's built-in one, an image made on the way); also at the head of the log."""


class BuildRecords:
    """Build records and logs under `<artifacts>/builds`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def record_path(self, key: str) -> Path:
        return self.root / f"{key_name(key)}.json"

    def log_path(self, key: str) -> Path:
        return self.root / f"{key_name(key)}.log"

    def dockerfile_path(self, key: str) -> Path:
        """Where the Dockerfile that was built is kept when it differs from the task's own."""
        return self.root / f"{key_name(key)}.Dockerfile"

    def read(self, key: str) -> BuildRecord | None:
        try:
            return BuildRecord.model_validate_json(self.record_path(key).read_bytes())
        except (OSError, ValueError):
            return None

    def write(self, key: str, record: BuildRecord) -> None:
        target = self.record_path(key)
        partial = target.with_name(f".{target.name}.{os.getpid()}.part")
        partial.write_text(record.model_dump_json(indent=2))
        partial.replace(target)

    @contextlib.asynccontextmanager
    async def lock(self, key: str) -> AsyncIterator[None]:
        """Hold the key's build lock (across processes); waiting never blocks the event loop."""
        fd = os.open(self.root / f"{key_name(key)}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    await asyncio.sleep(_LOCK_POLL_SEC)
            yield
        finally:
            os.close(fd)


def tail(path: Path, limit: int = LOG_TAIL_BYTES) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
