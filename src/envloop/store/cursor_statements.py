"""Core statements compiled once per dialect and run on the driver's cursor of a connection.

The queue's write transaction (`envloop.store.queue.settle`) runs a handful of statements per
worker wake-up. Through `Connection.execute` each costs SQLAlchemy ~35-50 µs of CPU (cache key,
execution context, result set-up, events) against ~7 µs for the same SQL on the driver's cursor.
A `CursorStatement` lets SQLAlchemy compile the statement for the connection's dialect once and
converts every value with its column type's own bind processor, so what is written reads back as
if SQLAlchemy had written it (JSON text, SQLite's DateTime text, enums as their names, NULLs); the
rows a select returns go through the columns' result processors. It runs on the same connection,
inside the caller's transaction; the engine's cursor-execution listeners see each statement, and a
driver error is raised as SQLAlchemy would raise it (`DBAPIError`), so callers that retry on its
SQLSTATE or lock errors see no difference.

Only statements whose SQL is fixed at compile time are accepted: no expanding IN lists (write the
list as separate binds), no values SQLAlchemy computes per execution (defaults, callables).
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Dialect, Select, UpdateBase
from sqlalchemy.engine.interfaces import DBAPICursor
from sqlalchemy.exc import DBAPIError
from sqlalchemy.types import TypeEngine

_Processor = Callable[[Any], Any] | None
_Statement = Select[*tuple[Any, ...]] | UpdateBase


@dataclass(frozen=True)
class _Compiled:
    """One statement as one dialect runs it: its SQL, and how to turn given values into parameters."""

    sql: str
    positional: bool
    names: tuple[str, ...]
    """The parameters in the order the SQL takes them (positional styles) or by name."""
    constants: Mapping[str, Any]
    """Values fixed in the statement, already converted for the driver."""
    processors: Mapping[str, _Processor]
    """Per parameter given at execution, its type's conversion for the driver."""
    columns: tuple[TypeEngine[Any], ...]
    """The types of the columns a select returns."""

    def parameters(self, given: Mapping[str, Any]) -> Sequence[Any] | dict[str, Any]:
        """The driver's parameters for `given` values, converted as SQLAlchemy would convert them."""
        converted = dict(self.constants)
        for name, process in self.processors.items():
            value = given[name]
            converted[name] = process(value) if process is not None else value
        if self.positional:
            return tuple(converted[name] for name in self.names)
        return converted


def _compile(statement: _Statement, dialect: Dialect) -> _Compiled:
    """SQLAlchemy's compilation of `statement` for `dialect`, and the bind processors of its
    parameters; refused where SQLAlchemy would still change the SQL or a value at execution."""
    compiled = statement.compile(dialect=dialect)
    per_execution = (
        compiled.post_compile_params,
        compiled.literal_execute_params,
        compiled.insert_prefetch,
        compiled.update_prefetch,
        compiled.escaped_bind_names,
    )
    if any(per_execution):
        raise ValueError(f"SQLAlchemy completes this statement per execution: {statement}")
    names = tuple(compiled.positiontup or ()) if compiled.positional else tuple(compiled.bind_names.values())
    constants: dict[str, Any] = {}
    processors: dict[str, _Processor] = {}
    for name in names:
        bind = compiled.binds[name]
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if bind.required:
            processors[name] = process
        elif bind.callable is not None:
            raise ValueError(f"a value computed per execution ({name}): {statement}")
        else:
            constants[name] = process(bind.value) if process is not None else bind.value
    columns = statement.selected_columns if isinstance(statement, Select) else ()
    types = tuple(column.type.dialect_impl(dialect) for column in columns)
    return _Compiled(str(compiled), compiled.positional, names, constants, processors, types)


class CursorStatement:
    """A Core statement run on the driver's cursor, compiled once for each dialect it meets."""

    def __init__(self, statement: _Statement) -> None:
        self.statement = statement
        self._by_dialect: dict[tuple[str, str], _Compiled] = {}
        self._results_by_dialect: dict[tuple[str, str], tuple[_Processor, ...]] = {}

    def _for(self, dialect: Dialect) -> _Compiled:
        key = (dialect.name, dialect.driver)
        compiled = self._by_dialect.get(key)
        if compiled is None:
            compiled = self._by_dialect[key] = _compile(self.statement, dialect)
        return compiled

    def rowcount(self, conn: Connection, **given: Any) -> int:
        """Run the statement once; how many rows it changed."""
        compiled = self._for(conn.dialect)
        cursor = conn.connection.cursor()
        try:
            _run(conn, cursor, compiled.sql, compiled.parameters(given))
            count: int = cursor.rowcount
        finally:
            cursor.close()
        return count

    def run_each(self, conn: Connection, each: Sequence[Mapping[str, Any]]) -> None:
        """Run the statement once per mapping of values, in one call to the driver."""
        compiled = self._for(conn.dialect)
        cursor = conn.connection.cursor()
        try:
            _run(conn, cursor, compiled.sql, [compiled.parameters(given) for given in each], many=True)
        finally:
            cursor.close()

    def rows(self, conn: Connection, **given: Any) -> list[tuple[Any, ...]]:
        """Run the select; its rows as tuples, each value converted by its column's type."""
        compiled = self._for(conn.dialect)
        cursor = conn.connection.cursor()
        try:
            _run(conn, cursor, compiled.sql, compiled.parameters(given))
            fetched = cursor.fetchall()
            processors = self._result_processors(conn.dialect, compiled, cursor.description)
        finally:
            cursor.close()
        if not any(processors):
            return [tuple(row) for row in fetched]
        return [
            tuple(
                process(value) if process is not None else value
                for process, value in zip(processors, row, strict=True)
            )
            for row in fetched
        ]

    def _result_processors(
        self, dialect: Dialect, compiled: _Compiled, description: Sequence[Sequence[Any]]
    ) -> tuple[_Processor, ...]:
        """Each column's conversion of what the driver returns, built at the first execution: some
        depend on the type the driver reports for the column (PostgreSQL's numeric types)."""
        key = (dialect.name, dialect.driver)
        processors = self._results_by_dialect.get(key)
        if processors is None:
            processors = self._results_by_dialect[key] = tuple(
                type_.result_processor(dialect, column[1])
                for type_, column in zip(compiled.columns, description, strict=True)
            )
        return processors


def _run(conn: Connection, cursor: DBAPICursor, sql: str, parameters: Any, *, many: bool = False) -> None:
    """Call the driver as `Connection.execute` would: its cursor-execution listeners told before and
    after (without an execution context), its errors raised as SQLAlchemy's `DBAPIError` with the
    driver's error (and SQLSTATE) as `orig`."""
    dispatch = conn.dispatch
    for listener in dispatch.before_cursor_execute:
        sql, parameters = listener(conn, cursor, sql, parameters, None, many)
    dbapi_error: type[Exception] = conn.dialect.loaded_dbapi.Error
    try:
        if many:
            cursor.executemany(sql, parameters)
        else:
            cursor.execute(sql, parameters)
    except dbapi_error as exc:
        raise DBAPIError.instance(sql, parameters, exc, dbapi_error, dialect=conn.dialect) from exc
    for listener in dispatch.after_cursor_execute:
        listener(conn, cursor, sql, parameters, None, many)
