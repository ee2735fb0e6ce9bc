"""Where the embedded installation lives, and the handles every operation needs."""

from dataclasses import dataclass
from pathlib import Path

from envloop.home import envloop_home, private_dir, private_sqlite
from envloop.services.secrets import seal_plaintext
from envloop.settings import settings
from envloop.store.artifacts import ArtifactStore, open_artifact_store
from envloop.store.db import Store

__all__ = ["Context", "envloop_home", "open_context"]

DATABASE_FILE = "envloop.db"


@dataclass
class Context:
    home: Path
    store: Store
    artifacts: ArtifactStore
    project_id: str

    @property
    def instances_dir(self) -> Path:
        return self.home / "instances"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    def close(self) -> None:
        self.store.close()


def open_context(home: Path | None = None) -> Context:
    """Open the store named by ENVLOOP_DATABASE_URL, else SQLite under ENVLOOP_HOME, and the
    artifact store named by ENVLOOP_ARTIFACTS (a path or an fsspec URL), else under ENVLOOP_HOME;
    the home and the files of ours in it are private (`envloop.home`)."""
    home = private_dir(home or envloop_home())
    chosen = settings()
    url = chosen.database_url
    if url is None:
        private_sqlite(home / DATABASE_FILE)
        url = f"sqlite:///{home / DATABASE_FILE}"
    store = Store(url)
    artifacts = open_artifact_store(chosen.artifacts, home)
    seal_plaintext(store, home)
    return Context(home=home, store=store, artifacts=artifacts, project_id=store.default_project_id)
