"""Opening the store: engine set-up per dialect, migrations on first use, read/write sessions.

SQLite gets WAL (readers never block the writer) and `BEGIN IMMEDIATE` for write transactions, so
two workers that both read-then-write serialize on the lock instead of failing with SQLITE_BUSY.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from envloop.store.tables import Project

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
HEAD_REVISION = "0005"
DEFAULT_PROJECT = "default"


def _sqlite_engine(url: str) -> Engine:
    engine = create_engine(url, connect_args={"isolation_level": None, "timeout": 60}, pool_size=8)

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=60000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get("sqlite_immediate", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        return _sqlite_engine(url)
    scheme, sep, rest = url.partition("://")
    if sep and scheme in ("postgresql", "postgres"):
        url = f"postgresql+psycopg://{rest}"  # the driver envloop installs (psycopg 3)
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


def _migrate(engine: Engine) -> None:
    with engine.connect() as conn:
        has_version = inspect(conn).has_table("alembic_version")
        current = (
            conn.execute(text("SELECT version_num FROM alembic_version")).scalar() if has_version else None
        )
    if current == HEAD_REVISION:
        return
    # Alembic is imported only when there is something to migrate: it costs every CLI call ~0.1 s.
    from alembic import command  # noqa: PLC0415
    from alembic.config import Config  # noqa: PLC0415

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # A server and its workers may open a new database at once: one migrates, the others
            # wait here and then find nothing left to do.
            conn.execute(text("SELECT pg_advisory_xact_lock(726157)"))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


class Store:
    """The database behind every surface. `write()` sessions serialize on SQLite; `read()` never blocks."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.is_sqlite = url.startswith("sqlite")
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

    def _ensure_project(self, name: str) -> str:
        with self.read() as session:
            found = session.scalar(select(Project.id).where(Project.name == name))
        if found is not None:
            return found
        try:
            with self.write() as session:
                session.add(Project(id=f"prj_{name}", name=name))
        except IntegrityError:
            pass
        return f"prj_{name}"

    def close(self) -> None:
        self.engine.dispose()
