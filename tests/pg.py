"""A throwaway PostgreSQL server for the test run, and a fresh database per test.

`scripts/test` starts one server for the whole run and exports its URL as
ENVLOOP_TEST_POSTGRES_URL; a bare `pytest` without that variable starts its own through the same
code. A machine without the PostgreSQL binaries fails the PostgreSQL tests loudly instead of
skipping them (`scripts/setup` installs them).

    python -m tests.pg start DIR   # prints the server URL
    python -m tests.pg stop DIR
"""

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from envloop.store.db import Store
from tests.ports import free_port

BACKENDS = ["sqlite", "postgresql"]
URL_VARIABLE = "ENVLOOP_TEST_POSTGRES_URL"
PG_USER = "postgres"


def _bindir() -> Path:
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise RuntimeError("PostgreSQL server binaries not found: run scripts/setup (installs postgresql)")


def _as_server_user(args: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root; as root we run it as the `postgres` system user."""
    if os.geteuid() != 0:
        return args
    return ["runuser", "-u", PG_USER, "--", *args]


def _run(args: list[str]) -> None:
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")


def start(directory: Path) -> str:
    """initdb + start on a free loopback port; returns the server's URL (database `postgres`).

    `directory` is handed to the server's user, so its parents must be traversable by it."""
    bindir = _bindir()
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "data"
    if os.geteuid() == 0:
        entry = pwd.getpwnam(PG_USER)
        os.chown(directory, entry.pw_uid, entry.pw_gid)
    _run(_as_server_user([str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", PG_USER, "-N"]))
    port = free_port()
    options = (
        f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={directory} "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400"
    )
    log = str(directory / "log")
    _run(_as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", log, "-w", "start"]))
    return f"postgresql+psycopg://{PG_USER}@127.0.0.1:{port}/postgres"


def stop(directory: Path) -> None:
    data = directory / "data"
    if data.exists():
        subprocess.run(
            _as_server_user([str(_bindir() / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
            check=False,
            capture_output=True,
        )
    shutil.rmtree(directory, ignore_errors=True)


def _admin(server_url: str, statement: str) -> None:
    engine = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(statement))
    finally:
        engine.dispose()


class Databases:
    """Hands out fresh, migrated databases cloned from one template (cloning beats migrating)."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.template = f"envloop_tpl_{uuid.uuid4().hex[:10]}"
        _admin(server_url, f"CREATE DATABASE {self.template}")
        Store(self.url_of(self.template)).close()

    def url_of(self, name: str) -> str:
        return make_url(self.server_url).set(database=name).render_as_string(hide_password=False)

    @contextmanager
    def fresh(self) -> Iterator[str]:
        name = f"envloop_t_{uuid.uuid4().hex[:12]}"
        _admin(self.server_url, f"CREATE DATABASE {name} TEMPLATE {self.template}")
        try:
            yield self.url_of(name)
        finally:
            _admin(self.server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def close(self) -> None:
        _admin(self.server_url, f"DROP DATABASE IF EXISTS {self.template} WITH (FORCE)")


@contextmanager
def server() -> Iterator[str]:
    """The run's server: the one scripts/test started, else one of our own for this session."""
    url = os.environ.get(URL_VARIABLE)
    if url:
        yield url
        return
    # Not under pytest's tmp dirs: those are private to root, and the server runs as `postgres`.
    directory = Path(tempfile.mkdtemp(prefix="envloop-pg-"))
    try:
        yield start(directory)
    finally:
        stop(directory)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        sys.stderr.write("usage: python -m tests.pg start|stop DIR\n")
        return 2
    directory = Path(argv[1])
    if argv[0] == "start":
        print(start(directory))
    else:
        stop(directory)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
