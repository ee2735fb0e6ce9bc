"""The embedded background worker: a submission on the embedded store (`el job submit`,
`envloop.LocalClient`) makes sure one runs for the store.

One lock file per home decides who is the background worker: a submission starts a worker unless
the lock is held, so concurrent submissions never start two, and a crashed worker releases it with
its process. The lock means "this worker will look at the queue again": a worker lets go of it as
it stops serving (before anything at its exit can hold it up, such as a thread the interpreter
waits for), and an idle worker lets go before it decides to exit, then looks at the queue once
more. A submission that found the lock held has its trials seen by that last look; one that finds
it free starts a worker of its own. So a submission always ends with a worker for its trials.

A worker keeps the trial settings (`ENVLOOP_*` variables that change what a trial does: the build
network, the sandbox, the ceilings, …) it started with, so the lock's holder writes them beside
the lock, and a submission whose own differ is refused, naming them, rather than left to a worker
that would run its trials otherwise than it asked (`refuse_other_settings`).

This module imports nothing heavy: a submission starts the worker before it loads the store and
checks the request, so the worker's own start-up overlaps the submission instead of following it
(`SubmissionWorker`). The whole mechanism, with the queue and leases it serves:
docs/design/queue-and-leases.md.
"""

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO

from envloop.core.capacity import default_capacity
from envloop.core.status import TERMINAL
from envloop.errors import UserError
from envloop.settings import settings

IDLE_EXIT_SEC = 30.0
STOP_WAIT_SEC = 10.0


def _lock_path(home: Path) -> Path:
    return home / "background-worker.lock"


def _settings_path(home: Path) -> Path:
    return home / "background-worker.settings.json"


class BackgroundLock:
    """The background-worker lock of a home, as this process holds it (the file names the holder's
    pid, for those who stop it)."""

    def __init__(self, home: Path) -> None:
        self._home = home
        self._path = _lock_path(home)
        self._handle: IO[str] | None = None

    @property
    def held(self) -> bool:
        return self._handle is not None

    def take(self) -> bool:
        """Hold the lock unless another process does; whether this one holds it now."""
        if self._handle is not None:
            return True
        handle = self._path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle
        _write_settings(self._home)
        return True

    def release(self) -> None:
        """Let go: the next submission starts a worker of its own."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def try_hold_lock(home: Path) -> BackgroundLock | None:
    """The background-worker lock, held by this process from now on; None if another holds it."""
    lock = BackgroundLock(home)
    return lock if lock.take() else None


def _write_settings(home: Path) -> None:
    """Record, as the lock's holder, the trial settings this process runs trials with."""
    record = {"pid": os.getpid(), "settings": settings().trial_environ()}
    scratch = _settings_path(home).with_suffix(f".{os.getpid()}.tmp")
    scratch.write_text(json.dumps(record))
    scratch.replace(_settings_path(home))


def _running_settings(home: Path) -> tuple[int, dict[str, str]] | None:
    """The pid and trial settings of the worker holding the lock; None when that cannot be told
    (no worker, one that has not written them yet, or one of a version that wrote none)."""
    try:
        holder = _lock_path(home).read_text().split()
        record = json.loads(_settings_path(home).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not holder or str(record.get("pid")) != holder[0]:
        return None
    found = record.get("settings")
    if not isinstance(found, dict):
        return None
    return int(holder[0]), {str(name): str(value) for name, value in found.items()}


def _shown(value: str | None) -> str:
    """A setting's value as the refusal quotes it: short words are quoted, a path or a list is not
    (a message names no host path)."""
    if value is None:
        return "unset"
    if len(value) > 40 or any(mark in value for mark in "/,="):
        return "set to another value"
    return repr(value)


def refuse_other_settings(home: Path) -> None:
    """Refuse a submission that the running background worker would run with trial settings other
    than the submitting process's own, naming each that differs and how to get a worker with the
    new ones. A worker that cannot be told about (see `_running_settings`) is trusted."""
    running = _running_settings(home)
    if running is None:
        return
    pid, theirs = running
    ours = settings().trial_environ()
    differ = sorted(name for name in theirs.keys() | ours.keys() if theirs.get(name) != ours.get(name))
    if not differ:
        return
    said = "; ".join(
        f"{name} is {_shown(ours.get(name))} here and {_shown(theirs.get(name))} for it" for name in differ
    )
    raise UserError(
        f"the background worker of this store (pid {pid}) runs trials with other settings: {said}. "
        f"Stop it (kill {pid}: it hands back the trials it claimed) or let it exit, "
        f"{IDLE_EXIT_SEC:g} s after the queue empties, then submit again"
    )


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


def submission_capacity(asked: int | None, concurrency: int | None) -> int | None:
    """Trials at once for a worker started for a submission: as asked, else enough for the job's own
    concurrency limit when that is above a worker's default; None leaves the worker its default."""
    if asked is not None:
        return asked
    if concurrency is not None and concurrency > default_capacity():
        return concurrency
    return None


class SubmissionWorker:
    """The background worker for the trials one submission queues.

    It starts before the submission is checked, so its interpreter's start-up overlaps the checks
    instead of following them; a refused submission stops it again (`stop`), and so does one that
    left nothing to run (a request ID of a job that already ended). When a worker was running
    already, starting one is tried again after the submission (`keep_for`): the running one may
    have let go of the lock and taken its last look before the trials existed. A running worker
    whose trial settings differ from this process's refuses the submission before it is made."""

    def __init__(self, home: Path, capacity: int | None) -> None:
        self._home = home
        self._capacity = capacity
        self._process = start_background_worker(home, capacity)
        if self._process is None:
            refuse_other_settings(home)

    def stop(self) -> None:
        """Stop the worker this submission started, if it started one."""
        if self._process is not None:
            stop_started_worker(self._process)
            self._process = None

    def keep_for(self, status: str) -> bool:
        """After the submission, whose job (or trial) is in `status`: keep a worker while something
        waits, else stop the one started. True when what waits was left to a worker that was
        running already, with the capacity it has."""
        if status in TERMINAL:
            self.stop()
            return False
        if self._process is None:
            self._process = start_background_worker(self._home, self._capacity)
        return self._process is None
