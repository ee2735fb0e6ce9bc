"""The embedded SQLite store opened for reads with `sqlite3` alone: what a short command (`el job get`,
`el job result`) needs, without importing SQLAlchemy.

Each `Query` (`envloop.store.reads`) runs as the SQL text SQLAlchemy compiles for it, kept in the
home's query cache (`query-cache.json`) with how to convert each column (JSON, UTC time, boolean)
as the tables declare it. The cache is filled with every declared read when the store is first
opened in full without one (SQLAlchemy is loaded then anyway), so even a new home's first read
runs without it; a query missing from the cache, or whose fingerprint changed, is compiled when
first run (importing SQLAlchemy that once) together with every other that is missing, and the
cache rewritten. A store that is not at the current schema revision is not opened this way at all
(`open_light` returns None and the caller opens the full store, which migrates it).
"""

import json
import sqlite3
import tempfile
import threading
from collections import namedtuple
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from envloop.core.status import ErrorType, TrialStatus
from envloop.store.reads import Query, declared_queries
from envloop.store.schema import HEAD_REVISION, LOCK_WAIT_SEC, VERSION_QUERY

CACHE_FILE = "query-cache.json"


class UnsupportedQueryError(TypeError):
    """A statement this reader cannot run faithfully (a column or parameter type it does not convert)."""


def _utc(value: Any) -> datetime | None:
    if value is None:
        return None
    parsed = datetime.fromisoformat(value) if isinstance(value, str) else value
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _json(value: Any) -> Any:
    return None if value is None else json.loads(value)


def _bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _member_of(kind: type[StrEnum]) -> Callable[[Any], Any]:
    def member(value: Any) -> Any:
        return None if value is None else kind(value)

    return member


CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "json": _json,
    "utc": _utc,
    "bool": _bool,
    **{kind.__name__: _member_of(kind) for kind in (TrialStatus, ErrorType)},
}
"""How to convert each column type the tables use; an enum column converts by its class's name."""


@dataclass(frozen=True)
class Compiled:
    """A statement as SQLite text: named parameters, the values it fixed at build time, the
    parameters that take a list (`IN`), its column names and each column's conversion."""

    sql: str
    defaults: dict[str, Any]
    expanding: list[str]
    fields: list[str]
    convert: list[str | None]


def compile_sqlite(query: Query) -> Compiled:
    """SQLAlchemy's SQLite compilation of the query (imports SQLAlchemy)."""
    from sqlalchemy import JSON, Boolean, DateTime, Enum  # noqa: PLC0415 - only when the cache misses
    from sqlalchemy.dialects import sqlite  # noqa: PLC0415

    from envloop.store.tables import UTCDateTime  # noqa: PLC0415

    dialect = sqlite.dialect(paramstyle="named")
    statement = query.statement
    compiled = statement.compile(dialect=dialect)
    defaults: dict[str, Any] = {}
    expanding = []
    for bind, name in compiled.bind_names.items():
        kind = bind.type
        # sqlite3 binds an enum member as its string, as the column stores it.
        if kind.bind_processor(dialect) is not None and not isinstance(kind, Boolean | Enum):
            raise UnsupportedQueryError(f"{query.name}: parameter {name!r} of type {kind!r}")
        if bind.expanding:
            expanding.append(name)
        if not bind.required:
            defaults[name] = compiled.params[name]
    convert: list[str | None] = []
    for column in statement.selected_columns:
        kind = column.type
        if isinstance(kind, JSON):
            convert.append("json")
        elif isinstance(kind, UTCDateTime):
            convert.append("utc")
        elif isinstance(kind, Boolean):
            convert.append("bool")
        elif (
            isinstance(kind, Enum) and kind.enum_class is not None and kind.enum_class.__name__ in CONVERTERS
        ):
            convert.append(kind.enum_class.__name__)
        elif isinstance(kind, DateTime) or kind.result_processor(dialect, None) is not None:
            raise UnsupportedQueryError(f"{query.name}: column {column!r} of type {kind!r}")
        else:
            convert.append(None)
    return Compiled(
        sql=str(compiled),
        defaults=defaults,
        expanding=expanding,
        fields=list(statement.selected_columns.keys()),
        convert=convert,
    )


class QueryCache:
    """Compiled queries by name, in a JSON file of the home: read once, rewritten when one is added."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._entries: dict[str, Any] = json.loads(path.read_text())
        except (OSError, ValueError):
            self._entries = {}
        self._rows: dict[str, type[tuple[Any, ...]]] = {}

    def get(self, query: Query) -> Compiled:
        entry = self._entries.get(query.name)
        if entry is None or entry.get("fingerprint") != query.fingerprint:
            # SQLAlchemy is being loaded for this one: compile the others that are missing too, so
            # the next command's reads find theirs.
            self.fill([query, *declared_queries()])
            entry = self._entries[query.name]
        return Compiled(**{k: v for k, v in entry.items() if k != "fingerprint"})

    def fill(self, queries: Sequence[Query]) -> None:
        """Compile each query missing or stale, once however often it is given, and rewrite the cache
        once if any was."""
        stale = {
            q.name: q for q in queries if self._entries.get(q.name, {}).get("fingerprint") != q.fingerprint
        }
        for each in stale.values():
            self._entries[each.name] = {"fingerprint": each.fingerprint, **compile_sqlite(each).__dict__}
        if stale:
            self._save()

    def row_type(self, query: Query, fields: list[str]) -> type[tuple[Any, ...]]:
        found = self._rows.get(query.name)
        if found is None:
            found = self._rows[query.name] = namedtuple("Row", fields, rename=True)
        return found

    def _save(self) -> None:
        """Written whole and renamed into place, so a concurrent reader sees the old file or the new."""
        try:
            with tempfile.NamedTemporaryFile("w", dir=self.path.parent, delete=False, suffix=".tmp") as tmp:
                json.dump(self._entries, tmp)
            Path(tmp.name).replace(self.path)
        except OSError:
            return  # a read-only home: the next command compiles again


class SqliteReads:
    """Read queries on one `sqlite3` connection, inside one deferred transaction (one snapshot)."""

    def __init__(self, conn: sqlite3.Connection, cache: QueryCache) -> None:
        self.conn = conn
        self.cache = cache

    def rows(self, query: Query, **params: object) -> Sequence[Any]:
        compiled = self.cache.get(query)
        values: dict[str, Any] = {**compiled.defaults, **params}
        sql = compiled.sql
        for name in compiled.expanding:
            items = list(values.pop(name))
            names = [f"{name}__{i}" for i in range(len(items))]
            values.update(zip(names, items, strict=True))
            listed = ", ".join(f":{n}" for n in names) if names else "SELECT 1 WHERE 0"
            sql = sql.replace(f"(__[POSTCOMPILE_{name}])", f"({listed})")
        row = self.cache.row_type(query, compiled.fields)
        converters = [(i, CONVERTERS[kind]) for i, kind in enumerate(compiled.convert) if kind is not None]
        found = []
        for raw in self.conn.execute(sql, values):
            values_out = list(raw)
            for index, convert in converters:
                values_out[index] = convert(values_out[index])
            found.append(row(*values_out))
        return found

    def first(self, query: Query, **params: object) -> Any:
        found = self.rows(query, **params)
        return found[0] if found else None


class LightStore:
    """The embedded SQLite store for reads: one `sqlite3` connection and the home's query cache.
    One snapshot at a time: a second thread waits for the first to finish its reads."""

    def __init__(self, conn: sqlite3.Connection, cache: QueryCache) -> None:
        self.conn = conn
        self.cache = cache
        self._turn = threading.Lock()

    @contextmanager
    def reads(self) -> Iterator[SqliteReads]:
        with self._turn:
            self.conn.execute("BEGIN")
            try:
                yield SqliteReads(self.conn, self.cache)
            finally:
                self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


def fill_query_cache(home: Path) -> None:
    """Compile every declared read into the home's cache where one is missing or stale: for a process
    that has just opened the full store (SQLAlchemy is loaded), so that the home's next reads need
    not."""
    QueryCache(home / CACHE_FILE).fill(declared_queries())


def open_light(database: Path, home: Path) -> LightStore | None:
    """The store at `database` for reads, or None when it must be opened in full first: it does not
    exist yet, or its schema is not at HEAD_REVISION (opening it in full migrates it)."""
    if not database.is_file():
        return None
    conn = sqlite3.connect(database, timeout=LOCK_WAIT_SEC, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout={int(LOCK_WAIT_SEC * 1000)}")
        revision = conn.execute(VERSION_QUERY).fetchone()
    except sqlite3.DatabaseError:
        revision = None
    if revision is None or revision[0] != HEAD_REVISION:
        conn.close()
        return None
    return LightStore(conn, QueryCache(home / CACHE_FILE))
