"""The handles every operation needs: the store, the artifact store and the project.

Opened by `envloop.services.context.open_context`; defined on the store's floor so that what runs
trials (the queue's workers and pools) can be handed one without importing the service layer."""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envloop.store.artifacts import ArtifactStore
from envloop.store.reads import Reads, SessionReads

if TYPE_CHECKING:
    from envloop.store.db import Store
    from envloop.store.light import LightStore


@dataclass
class Context:
    """The store, the artifact store and the project. A context opened for reads (`open_context(
    light=True)`) runs its reads with `sqlite3` alone and opens the full store (SQLAlchemy,
    migrations) only when something first asks for `store`."""

    home: Path
    artifacts: ArtifactStore
    project_id: str
    url: str
    _store: "Store | None" = None
    _light: "LightStore | None" = None

    @property
    def store(self) -> "Store":
        if self._store is None:
            from envloop.store.db import Store  # noqa: PLC0415 - SQLAlchemy, only when needed

            self._store = Store(self.url)
        return self._store

    @contextmanager
    def reads(self) -> Iterator[Reads]:
        """One snapshot to run read queries in (`envloop.store.reads`)."""
        if self._store is None and self._light is not None:
            with self._light.reads() as reads:
                yield reads
            return
        with self.store.read() as session:
            yield SessionReads(session)

    @property
    def instances_dir(self) -> Path:
        return self.home / "instances"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    def close(self) -> None:
        if self._light is not None:
            self._light.close()
        if self._store is not None:
            self._store.close()
