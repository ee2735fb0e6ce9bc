"""The store itself: migrations agree with the models, SQLite runs in WAL mode, reopening is cheap."""

import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from envloop.store.db import HEAD_REVISION, MIGRATIONS_DIR, Store, make_engine
from envloop.store.tables import Base
from tests.pg import BACKENDS


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_migrations_from_an_empty_database_create_exactly_the_tables_the_models_describe(
    store_url: str,
) -> None:
    engine = make_engine(store_url)
    config = _config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == HEAD_REVISION
    engine.dispose()


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_a_new_store_is_created_at_the_newest_revision_without_alembic(store_url: str) -> None:
    """Every new home opens a new store: it gets the models' tables at once, not ten migrations."""
    opening = f"""
import sys
from envloop.store.db import Store
Store({store_url!r}).close()
assert not [name for name in sys.modules if name.split(".")[0] == "alembic"], "alembic imported"
"""
    proc = subprocess.run(
        [sys.executable, "-c", opening], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    engine = make_engine(store_url)
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        assert MigrationContext.configure(conn).get_current_revision() == HEAD_REVISION
    engine.dispose()


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_alembic_migrates_a_store_that_was_created_at_the_newest_revision(store_url: str) -> None:
    """A store created without Alembic is one Alembic can take down a revision and up again: the
    next release's migrations will find it as they would a migrated one."""
    Store(store_url).close()
    revisions = [r.revision for r in ScriptDirectory.from_config(_config()).walk_revisions()]
    engine = make_engine(store_url)
    config = _config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, revisions[1])
    engine.dispose()
    store = Store(store_url)
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == HEAD_REVISION
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
    store.close()


def test_a_database_with_tables_but_no_revision_is_left_to_alembic_not_created_over(tmp_path: Path) -> None:
    """Only an empty database is created at the newest revision; anything else goes through
    Alembic, which stops at a table that is already there instead of building around it."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE projects (id VARCHAR(64) PRIMARY KEY)"))
    engine.dispose()
    with pytest.raises(OperationalError, match="already exists"):
        Store(url)


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


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_a_store_made_by_the_first_release_is_upgraded_in_place(store_url: str) -> None:
    engine = make_engine(store_url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0001")
        old_project = "INSERT INTO projects (id, name, created_at) VALUES ('prj_old', 'old', '2026-01-01')"
        conn.execute(text(old_project))
    engine.dispose()
    store = Store(store_url)
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == HEAD_REVISION
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        assert conn.execute(text("SELECT name FROM projects WHERE id = 'prj_old'")).scalar() == "old"


def test_the_store_knows_the_newest_migration_so_every_older_store_is_upgraded() -> None:
    """Opening a store skips Alembic when it is at HEAD_REVISION: were that not the newest migration,
    a store at HEAD_REVISION would never get the newer ones."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    assert ScriptDirectory.from_config(config).get_current_head() == HEAD_REVISION


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_a_store_at_each_earlier_revision_is_upgraded_to_the_models(store_url: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    revisions = [r.revision for r in ScriptDirectory.from_config(config).walk_revisions()]
    engine = make_engine(store_url)
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revisions[1])  # the one before the newest
    engine.dispose()
    store = Store(store_url)
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == revisions[0]
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
