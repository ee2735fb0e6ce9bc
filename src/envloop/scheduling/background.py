"""The embedded background worker: `el job submit` makes sure one runs for the store.

One lock file per home decides who is the background worker; it is held for the worker's life,
so concurrent submissions never start two, and a crashed worker releases it with its process.

This module imports nothing heavy: `el job submit` starts the worker before it loads the store,
so the worker's own start-up overlaps the submission instead of following it.
"""

import fcntl
import os
import subprocess
import sys
from pathlib import Path
from typing import IO

IDLE_EXIT_SEC = 30.0
STOP_WAIT_SEC = 10.0


def _lock_path(home: Path) -> Path:
    return home / "background-worker.lock"


def try_hold_lock(home: Path) -> IO[str] | None:
    """Take the background-worker lock for this process's lifetime; None if another holds it."""
    handle = _lock_path(home).open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def is_running(home: Path) -> bool:
    with _lock_path(home).open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


def start_background_worker(home: Path, capacity: int | None = None) -> "subprocess.Popen[bytes] | None":
    """Start a detached worker for this home unless one is alive; the started process, else None.

    `capacity` (trials at once) applies to a worker started now; one already running keeps its own.
    """
    home.mkdir(parents=True, exist_ok=True)
    if is_running(home):
        return None
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, ENVLOOP_HOME=str(home))
    args = ["worker", "--background", "--idle-exit", str(IDLE_EXIT_SEC)]
    if capacity is not None:
        args += ["--capacity", str(capacity)]
    with (logs / "worker.log").open("ab") as log_file:
        return subprocess.Popen(
            [sys.executable, "-m", "envloop", *args],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            env=env,
            start_new_session=True,
            close_fds=True,
        )


def stop_started_worker(process: "subprocess.Popen[bytes]") -> None:
    """Stop a worker this process started and no longer needs (its submission was refused): it
    stops as on any SIGTERM, handing back whatever it had claimed."""
    process.terminate()
    try:
        process.wait(STOP_WAIT_SEC)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
