"""Read queries declared once, run by SQLAlchemy or, on the embedded SQLite store, by `sqlite3` alone.

A read is a `Query`: a function that builds its SQLAlchemy statement (named `bindparam`s for what
the caller passes) when first needed. The server, the workers and every write path run it through
their SQLAlchemy session (`SessionReads`). A short command on the embedded store (`el job get`)
runs the same statement as SQLite text compiled by SQLAlchemy once and kept in the home's query
cache (`envloop.store.light`), so it never imports SQLAlchemy, whose import alone costs more than
such a command's budget. The SQL text is always SQLAlchemy's own compilation of the one
statement; nothing here writes SQL by hand.

Rows come back either way with the statement's column names as attributes, by index and unpacked.

A `@query` registers itself when its module is imported. The store names no module above it: the
layer that declares reads tells it how to import them all (`find_queries_with`, called by
`envloop.services.context`), for when the query cache is filled with every one at once.
"""

import hashlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from sqlalchemy import Select
    from sqlalchemy.orm import Session

    Statement = Select[*tuple[Any, ...]]
    """A select of any columns: what a `Query` builds."""

from envloop.store.schema import SEALED_PREFIX

TABLES_FILE = Path(__file__).with_name("tables.py")


@dataclass(frozen=True, eq=False)
class Query:
    """One read statement; `build` imports SQLAlchemy and the tables inside itself."""

    build: Callable[[], "Statement"]
    name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", f"{self.build.__module__}.{self.build.__qualname__}")

    @cached_property
    def statement(self) -> "Statement":
        """Built once per process, so SQLAlchemy's own compiled cache finds it again."""
        return self.build()

    @cached_property
    def fingerprint(self) -> str:
        """Changes when the statement could: the module that builds it (and any helper beside it),
        the tables' module, the package's version."""
        from envloop import __version__  # noqa: PLC0415 - the package imports this module's users

        parts = [__version__]
        for path in (Path(sys.modules[self.build.__module__].__file__ or ""), TABLES_FILE):
            found = path.stat()
            parts.append(f"{path}:{found.st_mtime_ns}:{found.st_size}")
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


_DECLARED: list[Query] = []
_FINDERS: list[Callable[[], object]] = []


def query(build: Callable[[], "Statement"]) -> Query:
    """Declare a read: `@query def job_row(): return select(...).where(Job.id == bindparam("job_id"))`."""
    declared = Query(build)
    _DECLARED.append(declared)
    return declared


def find_queries_with(finder: Callable[[], object]) -> None:
    """Register how to import every module of a higher layer that declares reads, so that
    `declared_queries` finds them without this module naming any."""
    if finder not in _FINDERS:
        _FINDERS.append(finder)


def declared_queries() -> list[Query]:
    """Every read envloop declares: those of the modules imported so far, after each registered
    finder has imported the rest (which imports SQLAlchemy's users)."""
    for find in _FINDERS:
        find()
    return list(_DECLARED)


class Reads(Protocol):
    """One consistent snapshot of the store to run read queries in."""

    def rows(self, query: Query, **params: object) -> Sequence[Any]: ...

    def first(self, query: Query, **params: object) -> Any: ...


class SessionReads:
    """Reads through a SQLAlchemy session (any dialect), inside the session's transaction; what the
    session holds unwritten is flushed first, so a read sees the session's own changes."""

    def __init__(self, session: "Session") -> None:
        self.session = session

    def rows(self, query: Query, **params: object) -> Sequence[Any]:
        self.session.flush()
        # Plain rows from the connection: the ORM's per-row bookkeeping would cost more than the rest.
        return self.session.connection().execute(query.statement, params).all()

    def first(self, query: Query, **params: object) -> Any:
        found = self.rows(query, **params)
        return found[0] if found else None


# Reads that opening the store makes (`store.db`, `store.light` through `services.context`).


@query
def project_by_name() -> "Statement":
    from sqlalchemy import bindparam, select  # noqa: PLC0415 - only when compiled

    from envloop.store.tables import Project  # noqa: PLC0415

    return select(Project.id).where(Project.name == bindparam("name"))


@query
def plaintext_secret() -> "Statement":
    """A profile secret stored before encryption existed, if any is left."""
    from sqlalchemy import select  # noqa: PLC0415

    from envloop.store.tables import ProfileSecret  # noqa: PLC0415

    return select(ProfileSecret.profile_id).where(ProfileSecret.value.not_like(f"{SEALED_PREFIX}%")).limit(1)


__all__ = [
    "Query",
    "Reads",
    "SessionReads",
    "declared_queries",
    "find_queries_with",
    "plaintext_secret",
    "project_by_name",
    "query",
]
