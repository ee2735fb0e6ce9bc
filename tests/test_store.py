"""The store itself: migrations agree with the models, SQLite runs in WAL mode, reopening is cheap."""

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text
from sqlalchemy.exc import OperationalError

from envloop.store.db import HEAD_REVISION, MIGRATIONS_DIR, Store, make_engine
from envloop.store.tables import Base
from tests.pg import BACKENDS


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def _revisions() -> list[str]:
    """Every migration's revision, the newest first."""
    return [r.revision for r in ScriptDirectory.from_config(_config()).walk_revisions()]


def _alembic(store_url: str, step: Callable[[Config, str], None], revision: str) -> None:
    """Alembic's `upgrade` or `downgrade` to `revision`, in a transaction of its own."""
    engine = make_engine(store_url)
    config = _config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        step(config, revision)
    engine.dispose()


def _assert_models_at(conn: Connection, revision: str) -> None:
    """The store is recorded at `revision` and its schema is exactly the models'."""
    assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == revision
    assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_migrations_from_an_empty_database_create_exactly_the_tables_the_models_describe(
    store_url: str,
) -> None:
    _alembic(store_url, command.upgrade, "head")
    engine = make_engine(store_url)
    with engine.connect() as conn:
        _assert_models_at(conn, HEAD_REVISION)
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
        _assert_models_at(conn, HEAD_REVISION)
        assert MigrationContext.configure(conn).get_current_revision() == HEAD_REVISION
    engine.dispose()


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_alembic_migrates_a_store_that_was_created_at_the_newest_revision(store_url: str) -> None:
    """A store created without Alembic is one Alembic can take down a revision and up again: the
    next release's migrations will find it as they would a migrated one."""
    Store(store_url).close()
    _alembic(store_url, command.downgrade, _revisions()[1])
    store = Store(store_url)
    with store.engine.connect() as conn:
        _assert_models_at(conn, HEAD_REVISION)
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
    _alembic(store_url, command.upgrade, "0001")
    engine = make_engine(store_url)
    with engine.begin() as conn:
        old_project = "INSERT INTO projects (id, name, created_at) VALUES ('prj_old', 'old', '2026-01-01')"
        conn.execute(text(old_project))
    engine.dispose()
    store = Store(store_url)
    with store.engine.connect() as conn:
        _assert_models_at(conn, HEAD_REVISION)
        assert conn.execute(text("SELECT name FROM projects WHERE id = 'prj_old'")).scalar() == "old"


def test_the_store_knows_the_newest_migration_so_every_older_store_is_upgraded() -> None:
    """Opening a store skips Alembic when it is at HEAD_REVISION: were that not the newest migration,
    a store at HEAD_REVISION would never get the newer ones."""
    assert ScriptDirectory.from_config(_config()).get_current_head() == HEAD_REVISION


@pytest.mark.parametrize("store_url", BACKENDS, indirect=True)
def test_a_store_at_each_earlier_revision_is_upgraded_to_the_models(store_url: str) -> None:
    revisions = _revisions()
    _alembic(store_url, command.upgrade, revisions[1])  # the one before the newest
    store = Store(store_url)
    with store.engine.connect() as conn:
        _assert_models_at(conn, revisions[0])
