"""Where the embedded installation lives (ENVLOOP_HOME, else ~/.envloop): light to import, so a
command can find it before it loads the store.

The home holds the store, the kept trials (hidden tests, agents' logs) and the secret key: it is
made private (0700), its SQLite files 0600 (SQLite gives its WAL and shared-memory files the mode
of the database file) and the artifacts directory 0700, even when they already exist with looser
modes. Only what this user owns is tightened: a home an operator shares on purpose through a
directory of someone else's is left as it is.
"""

import contextlib
import os
import stat
from pathlib import Path

from envloop.settings import settings

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")


def envloop_home() -> Path:
    return (settings().home or Path.home() / ".envloop").expanduser()


def private_dir(path: Path) -> Path:
    """`path` as a directory only its owner may enter, created if need be."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    tighten(path, PRIVATE_DIR)
    return path


def private_sqlite(database: Path) -> None:
    """The SQLite database at `database` and its companion files readable by their owner only; a
    new database file is created so, before SQLite creates its companions after it."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE))
    for suffix in SQLITE_SUFFIXES:
        tighten(database.with_name(database.name + suffix), PRIVATE_FILE)


def tighten(path: Path, mode: int) -> None:
    """Take away what `mode` does not grant, if `path` is this user's own (never through a link)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.geteuid():
        return
    if stat.S_IMODE(info.st_mode) & ~mode:
        path.chmod(stat.S_IMODE(info.st_mode) & mode)
