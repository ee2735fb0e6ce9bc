"""SQLite's write lock held by another connection: a write transaction waits for it by the shared
retry policy, then begins; past its patience it gives up with an error that says why."""

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envloop.store.db import begin_immediate, is_lock_timeout, make_engine


@pytest.fixture
def held_lock(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to a fresh WAL database that holds its write lock (BEGIN IMMEDIATE)."""
    holder = sqlite3.connect(tmp_path / "store.db", isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("CREATE TABLE marks (n INTEGER)")
    holder.execute("BEGIN IMMEDIATE")
    yield holder
    holder.close()


def _contender(tmp_path: Path) -> sqlite3.Connection:
    # No busy wait of its own: every wait for the lock is the retry policy's.
    return sqlite3.connect(tmp_path / "store.db", isolation_level=None, timeout=0)


def test_a_write_waits_while_another_connection_holds_the_lock_then_begins(
    held_lock: sqlite3.Connection, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    contender = _contender(tmp_path)
    release = threading.Timer(0.4, held_lock.execute, ["COMMIT"])
    started = time.monotonic()
    release.start()
    with caplog.at_level(logging.WARNING, logger="envloop.store"):
        begin_immediate(contender, patience_sec=10.0)
    waited = time.monotonic() - started
    release.join()
    contender.execute("INSERT INTO marks VALUES (1)")
    contender.execute("COMMIT")

    assert 0.4 <= waited < 5.0
    retries = [r for r in caplog.records if "write lock is held elsewhere" in r.getMessage()]
    assert len(retries) >= 2
    assert contender.execute("SELECT n FROM marks").fetchall() == [(1,)]
    contender.close()


def test_a_write_gives_up_after_its_patience_with_a_lock_timeout_that_says_so(
    held_lock: sqlite3.Connection, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    contender = _contender(tmp_path)
    started = time.monotonic()
    with (
        caplog.at_level(logging.WARNING, logger="envloop.store"),
        pytest.raises(sqlite3.OperationalError, match=r"held the store's write lock for 0\.5 s") as raised,
    ):
        begin_immediate(contender, patience_sec=0.5)
    waited = time.monotonic() - started

    # It gives up before a wait that would end past its patience (the waits are jittered).
    assert waited < 0.5 + 0.5, "not the default patience of a minute"
    assert any("write lock is held elsewhere" in r.getMessage() for r in caplog.records)
    assert is_lock_timeout(raised.value), "callers that retry lock timeouts still recognise it"
    assert not contender.in_transaction
    contender.close()


def test_a_store_being_switched_to_wal_elsewhere_is_waited_for_not_failed(tmp_path: Path) -> None:
    # The first opener of a new store writes its first page under a rollback journal; SQLite
    # refuses a second opener's switch to WAL meanwhile at once, without its busy handler.
    path = tmp_path / "store.db"
    switching = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    switching.execute("CREATE TABLE marks (n INTEGER)")
    switching.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, switching.execute, ["COMMIT"])
    release.start()
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
    finally:
        release.join()
        engine.dispose()
        switching.close()
    assert mode == "wal"
