"""ENVLOOP_HOME holds the store, the hidden tests and what agents left: it is private (0700), the
SQLite files 0600 and the artifacts directory 0700, whether envloop creates them or finds them with
looser modes."""

import stat
from pathlib import Path

from envloop.services.context import open_context
from envloop.services.keys import create_key

PRIVATE = {
    "": 0o700,
    "envloop.db": 0o600,
    "envloop.db-wal": 0o600,
    "envloop.db-shm": 0o600,
    "artifacts": 0o700,
}


def _modes_while_open(home: Path) -> dict[str, int]:
    """The modes with the store open and written to (SQLite's WAL and shared-memory files exist
    only then)."""
    ctx = open_context(home)
    try:
        create_key(ctx)
        return {name: stat.S_IMODE((home / name).stat().st_mode) for name in PRIVATE}
    finally:
        ctx.close()


def test_a_new_home_is_private_and_so_are_its_store_files(home: Path) -> None:
    assert not home.exists()
    assert _modes_while_open(home) == PRIVATE


def test_a_home_found_with_looser_modes_is_tightened(home: Path) -> None:
    ctx = open_context(home)
    create_key(ctx)
    for name in PRIVATE:  # as an older version, or a umask of 022, left them
        (home / name).chmod(0o755 if name in ("", "artifacts") else 0o644)
    ctx.close()
    assert _modes_while_open(home) == PRIVATE
