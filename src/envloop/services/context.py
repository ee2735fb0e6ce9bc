"""Where the embedded installation lives, and opening the handles every operation needs (`Context`,
which stands on the store's floor so the queue's workers can be handed one)."""

from pathlib import Path

from envloop.home import envloop_home, private_dir, private_sqlite
from envloop.settings import settings
from envloop.store.artifacts import ArtifactStore, open_artifact_store
from envloop.store.context import Context
from envloop.store.reads import find_queries_with, plaintext_secret, project_by_name
from envloop.store.schema import DEFAULT_PROJECT

__all__ = ["Context", "envloop_home", "open_context"]

DATABASE_FILE = "envloop.db"


def _import_every_read() -> None:
    """How the store finds every read of this layer (`find_queries_with`): imported only when the
    query cache is filled, since those modules import this one."""
    import envloop.services.reads  # noqa: F401, PLC0415


find_queries_with(_import_every_read)


def open_context(home: Path | None = None, *, light: bool = False) -> Context:
    """Open the store named by ENVLOOP_DATABASE_URL, else SQLite under ENVLOOP_HOME, and the
    artifact store named by ENVLOOP_ARTIFACTS (a path or an fsspec URL), else under ENVLOOP_HOME;
    the home and the files of ours in it are private (`envloop.home`).

    `light` (the CLI: most commands only read) opens an embedded SQLite store that is already at
    the current schema with `sqlite3` alone (`envloop.store.light`), and in full only when a
    command first asks for `store`; any other store, or one that needs migrating, sealing or its
    project created, is opened in full at once."""
    home = private_dir(home or envloop_home())
    chosen = settings()
    url = chosen.database_url
    artifacts = open_artifact_store(chosen.artifacts, home)
    embedded = url is None
    if url is None:
        private_sqlite(home / DATABASE_FILE)
        url = f"sqlite:///{home / DATABASE_FILE}"
        if light:
            opened = _open_light(home, artifacts, url)
            if opened is not None:
                return opened
    from envloop.store.db import Store  # noqa: PLC0415
    from envloop.store.secrets import seal_plaintext  # noqa: PLC0415 - cryptography, SQLAlchemy

    store = Store(url)
    seal_plaintext(store, home)
    if embedded:
        from envloop.store.light import CACHE_FILE, fill_query_cache  # noqa: PLC0415

        if not (home / CACHE_FILE).exists():  # a new home: its reads are compiled once, now
            fill_query_cache(home)
    return Context(home=home, artifacts=artifacts, project_id=store.default_project_id, url=url, _store=store)


def _open_light(home: Path, artifacts: ArtifactStore, url: str) -> Context | None:
    from envloop.store.light import open_light  # noqa: PLC0415

    light = open_light(home / DATABASE_FILE, home)
    if light is None:
        return None
    with light.reads() as reads:
        project = reads.first(project_by_name, name=DEFAULT_PROJECT)
        unsealed = reads.first(plaintext_secret)
    if project is None or unsealed is not None:
        light.close()
        return None
    return Context(home=home, artifacts=artifacts, project_id=project.id, url=url, _light=light)
