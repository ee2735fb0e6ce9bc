"""The store itself: migrations agree with the models, SQLite runs in WAL mode, reopening is cheap."""

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from envloop.store.db import HEAD_REVISION, Store
from envloop.store.tables import Base
from tests.pg import BACKENDS


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_migrations_create_exactly_the_tables_the_models_describe(store_url: str) -> None:
    store = Store(store_url)
    with store.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == HEAD_REVISION


def test_sqlite_store_uses_write_ahead_logging(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    with store.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_reopening_keeps_data_and_the_default_project(store_url: str) -> None:
    url = store_url
    first = Store(url)
    project = first.default_project_id
    first.close()
    assert Store(url).default_project_id == project
