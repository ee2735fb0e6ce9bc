"""The embedded background worker: `el job submit` makes sure one runs for the store.

One lock file per home decides who is the background worker; it is held for the worker's life,
so concurrent submissions never start two, and a crashed worker releases it with its process.
"""

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from envloop.services.context import Context

IDLE_EXIT_SEC = 30.0


def _lock_path(ctx: Context) -> Path:
    return ctx.home / "background-worker.lock"


def try_hold_lock(ctx: Context) -> IO[str] | None:
    """Take the background-worker lock for this process's lifetime; None if another holds it."""
    handle = _lock_path(ctx).open("a+")
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


def holder_pid(ctx: Context) -> int | None:
    """The pid of the running background worker, if any (read from its lock file)."""
    if not is_running(ctx):
        return None
    text = _lock_path(ctx).read_text().strip()
    return int(text) if text.isdigit() else None


def is_running(ctx: Context) -> bool:
    with _lock_path(ctx).open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


def ensure_background_worker(ctx: Context, capacity: int | None = None) -> bool:
    """Start a detached worker for this home unless one is alive. True when one was started.

    `capacity` (trials at once) applies to a worker started now; one already running keeps its own.
    """
    if is_running(ctx):
        return False
    ctx.logs_dir.mkdir(parents=True, exist_ok=True)
    log_file = (ctx.logs_dir / "worker.log").open("ab")
    env = dict(os.environ, ENVLOOP_HOME=str(ctx.home))
    args = ["worker", "--background", "--idle-exit", str(IDLE_EXIT_SEC)]
    if capacity is not None:
        args += ["--capacity", str(capacity)]
    subprocess.Popen(
        [sys.executable, "-m", "envloop", *args],
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=log_file,
        env=env,
        start_new_session=True,
        close_fds=True,
    )
    log_file.close()
    return True


def wait_until_running(ctx: Context, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_running(ctx):
            return True
        time.sleep(0.02)
    return False
