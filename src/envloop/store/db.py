"""Opening the store: engine set-up per dialect, a new store created at the newest schema and an
older one migrated, read/write sessions.

SQLite gets WAL (readers never block the writer) and `BEGIN IMMEDIATE` for write transactions, so
two workers that both read-then-write serialize on the lock instead of failing with SQLITE_BUSY.

No single wait for a lock lasts longer than LOCK_WAIT_SEC, well inside a worker's 30 s lease: a
worker stuck behind someone else's long write must get back to renewing its leases. On SQLite a
write transaction that could not start in that time is tried again by the shared retry policy
(`core.retry_policy`) until WRITE_PATIENCE_SEC have passed, so a command still waits for a long
write as it always did; on PostgreSQL a statement that waited that long for a row or table lock
fails with SQLSTATE 55P03, which the queue's writers try again (`is_lock_timeout`).
"""

import importlib
import logging
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    create_engine,
    event,
    inspect,
    text,
)
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from envloop.core.retry_policy import Backoff, call_retrying_now
from envloop.errors import ServerError
from envloop.setting_addresses import driver_url
from envloop.store.reads import SessionReads, project_by_name
from envloop.store.schema import DEFAULT_PROJECT, HEAD_REVISION, LOCK_WAIT_SEC, VERSION_QUERY
from envloop.store.tables import Base, Project

log = logging.getLogger("envloop.store")
WRITE_PATIENCE_SEC = 60.0
WRITE_LOCK_BACKOFF = Backoff(base_sec=0.01, cap_sec=1.0)
"""Short first waits: most writes hold the lock for milliseconds."""
_LOCK_NOT_AVAILABLE = "55P03"
MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_ALEMBIC_VERSION = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)
"""Alembic's own record of a store's revision, laid out as Alembic makes it, so that its later
migrations read a store created at HEAD_REVISION without Alembic (`_create_at_head`)."""


def is_lock_timeout(exc: BaseException) -> bool:
    """A wait for a lock that gave up after LOCK_WAIT_SEC (SQLite busy, PostgreSQL lock_timeout):
    nothing was changed, and the same work may be tried again."""
    orig = getattr(exc, "orig", exc)
    if isinstance(orig, sqlite3.OperationalError):
        return "locked" in str(orig) or "busy" in str(orig)
    return getattr(orig, "sqlstate", None) == _LOCK_NOT_AVAILABLE


def begin_immediate(driver_connection: sqlite3.Connection, patience_sec: float = WRITE_PATIENCE_SEC) -> None:
    """Take SQLite's write lock, each wait at most LOCK_WAIT_SEC, tried again by envloop's retry
    policy until `patience_sec` have passed; then a lock timeout that says so is raised for the
    caller to handle (`is_lock_timeout` knows it)."""

    def warn(_: BaseException, delay: float) -> None:
        log.warning("the store's write lock is held elsewhere; trying again in %.2f s", delay)

    try:
        _waiting_for_the_lock(lambda: driver_connection.execute("BEGIN IMMEDIATE"), patience_sec, warn)
    except sqlite3.OperationalError as exc:
        if not is_lock_timeout(exc):
            raise
        raise sqlite3.OperationalError(
            f"database is locked: another process held the store's write lock for {patience_sec:g} s"
        ) from exc


def _enter_wal(cursor: sqlite3.Cursor) -> None:
    """Put the store in WAL mode, waiting for whoever holds its lock as a write would.

    The first process to open a new store switches it to WAL, writing its first page under a
    rollback journal; another process asking for the switch meanwhile gets SQLITE_BUSY at once,
    without SQLite's busy handler (which waits only for locks it cannot deadlock on), so the
    shared retry policy waits instead."""
    _waiting_for_the_lock(lambda: cursor.execute("PRAGMA journal_mode=WAL"), WRITE_PATIENCE_SEC)


def _waiting_for_the_lock(
    statement: Callable[[], object],
    patience_sec: float,
    on_retry: Callable[[BaseException, float], None] | None = None,
) -> None:
    """Run a statement under the shared retry policy while SQLite refuses it because another
    connection holds the store's lock: tried again after short, growing waits until `patience_sec`
    have passed."""
    call_retrying_now(
        statement,
        worth_retrying=is_lock_timeout,
        backoff=WRITE_LOCK_BACKOFF,
        give_up_after_sec=patience_sec,
        on_retry=on_retry,
    )


def _sqlite_engine(url: str) -> Engine:
    engine = create_engine(url, connect_args={"isolation_level": None, "timeout": LOCK_WAIT_SEC}, pool_size=8)

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        _enter_wal(cursor)
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(LOCK_WAIT_SEC * 1000)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        if conn.get_execution_options().get("sqlite_immediate", False):
            # On the driver's connection: a failed BEGIN leaves no half-begun state to undo.
            begin_immediate(conn.connection.driver_connection)
        else:
            conn.exec_driver_sql("BEGIN")

    return engine


def make_engine(url: str) -> Engine:
    url = driver_url(url)
    if url.startswith("sqlite"):
        return _sqlite_engine(url)
    connect_args = {"options": f"-c lock_timeout={int(LOCK_WAIT_SEC * 1000)}"}
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20, connect_args=connect_args)


class StoreUnreachable(ServerError):
    """The database server of ENVLOOP_DATABASE_URL refused the first connection or never answered."""


def _reach(engine: Engine) -> None:
    """Connect once, so an unreachable server is one line naming it (without its password)."""
    try:
        with engine.connect():
            pass
    except OperationalError as exc:
        where = engine.url.set(drivername="postgresql").render_as_string(hide_password=True)
        reason = str(exc.orig or exc).strip().splitlines()[0]
        raise StoreUnreachable(f"cannot reach the store {where} (ENVLOOP_DATABASE_URL): {reason}") from None


def _version(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text(VERSION_QUERY)).scalar()


def _create_at_head(conn: Connection) -> None:
    """An empty database gets the models' tables at once, recorded at HEAD_REVISION.

    Replaying every migration from the first would end in the same schema (tests/test_store.py
    compares both with the models) but costs each new home ~0.3 s of CPU, most of it importing
    Alembic; migrations are for stores made by an earlier release."""
    Base.metadata.create_all(conn)
    _ALEMBIC_VERSION.create(conn)
    conn.execute(_ALEMBIC_VERSION.insert().values(version_num=HEAD_REVISION))


def _migrate(engine: Engine) -> None:
    with engine.connect() as conn:
        if _version(conn) == HEAD_REVISION:
            return
    # Several processes may open a new store at once (el job submit and the worker it starts, a
    # server and its workers): one migrates while the others wait, then find nothing left to do.
    # SQLite: the transaction holds the write lock from its BEGIN IMMEDIATE.
    migrating = engine.execution_options(sqlite_immediate=True) if engine.dialect.name == "sqlite" else engine
    with migrating.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Schema changes wait as long as they must (never LOCK_WAIT_SEC).
            conn.execute(text("SET LOCAL lock_timeout = 0"))
            conn.execute(text("SELECT pg_advisory_xact_lock(726157)"))
        version = _version(conn)
        if version == HEAD_REVISION:
            return
        if version is None and not inspect(conn).get_table_names():
            _create_at_head(conn)
            return
        _upgrade(conn)


def _upgrade(conn: Connection) -> None:
    """Alembic's migrations, from the store's revision to the newest, inside the caller's transaction."""
    # Alembic is imported only when there is something to migrate: it costs every CLI call ~0.1 s.
    from alembic import command  # noqa: PLC0415
    from alembic.config import Config  # noqa: PLC0415

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, "head")


class Store:
    """The database behind every surface. `write()` sessions serialize on SQLite; `read()` never blocks."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.is_sqlite = url.startswith("sqlite")
        if not self.is_sqlite:
            _reach(self.engine)
        _migrate(self.engine)
        self._read = sessionmaker(self.engine, expire_on_commit=False)
        self._write_engine = (
            self.engine.execution_options(sqlite_immediate=True) if self.is_sqlite else self.engine
        )
        self._write = sessionmaker(self._write_engine, expire_on_commit=False)
        self.default_project_id = self._ensure_project(DEFAULT_PROJECT)

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._read() as session, session.begin():
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        with self._write() as session, session.begin():
            yield session

    @contextmanager
    def write_connection(self) -> Iterator[Connection]:
        """A Core write transaction without ORM bookkeeping, for the queue's hot path."""
        with self._write_engine.begin() as conn:
            yield conn

    def insert_new(self, table: Table, rows: list[dict[str, Any]]) -> None:
        """Insert rows, skipping those whose primary key is already there: for derived facts that
        two readers may compute at once, where the first one written is as good as the second."""
        if not rows:
            return
        # Only this store's dialect is imported (PostgreSQL's alone costs an embedded command 50 ms).
        name = "sqlite" if self.is_sqlite else "postgresql"
        dialect = importlib.import_module(f"sqlalchemy.dialects.{name}")
        with self.write_connection() as conn:
            conn.execute(dialect.insert(table).on_conflict_do_nothing(), rows)

    def _ensure_project(self, name: str) -> str:
        with self.read() as session:
            found = SessionReads(session).first(project_by_name, name=name)
        if found is not None:
            return str(found.id)
        try:
            with self.write() as session:
                session.add(Project(id=f"prj_{name}", name=name))
        except IntegrityError:
            pass
        return f"prj_{name}"

    def close(self) -> None:
        self.engine.dispose()
