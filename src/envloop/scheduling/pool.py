"""Worker processes started and supervised by another process: `el serve`'s workers, and the extra
processes of an `el worker --processes N`.

Each is an ordinary `el worker` on the same store, as it would be on another machine: one that
crashes takes nothing else with it (its trials go back to the queue when their leases expire) and
is started again. None outlives the process that started it, even when that one is killed outright.
"""

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

RESTART_DELAY_SEC = 2.0
STOP_TIMEOUT_SEC = 60.0
_PR_SET_PDEATHSIG = 1

log = logging.getLogger("envloop.worker")


def worker_env(home: Path, database_url: str | None) -> dict[str, str]:
    """The environment of a worker process started on `home` and the store of `database_url`
    (None: the home's own SQLite store)."""
    env = dict(os.environ, ENVLOOP_HOME=str(home))
    if database_url is not None:
        env["ENVLOOP_DATABASE_URL"] = database_url
    return env


def _die_with_parent() -> None:
    """In the child: get SIGTERM when its parent dies, even by SIGKILL, so no worker outlives it."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class WorkerPool:
    """One `el worker` process per entry of `args` (its arguments), each restarted if it dies,
    all stopped on `stop()`.

    `log_file`: where their output goes (appended); None: this process's own stdout and stderr.
    Start and stop it from the main thread: the children's parent-death signal follows the thread
    that started them."""

    def __init__(self, args: list[list[str]], env: dict[str, str], log_file: Path | None) -> None:
        self._commands = [[sys.executable, "-m", "envloop", "worker", *each] for each in args]
        self._env = env
        self._log_file = log_file
        self._procs: list[subprocess.Popen[bytes]] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._supervise, name="worker-pool", daemon=True)

    def _spawn(self, index: int) -> "subprocess.Popen[bytes]":
        if self._log_file is not None:
            self._log_file.parent.mkdir(parents=True, exist_ok=True)
        # stdout=None: the child writes where this process does.
        with self._log_file.open("ab") if self._log_file else contextlib.nullcontext() as out:
            return subprocess.Popen(
                self._commands[index],
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
            )

    def start(self) -> None:
        self._procs = [self._spawn(index) for index in range(len(self._commands))]
        self._thread.start()

    def _supervise(self) -> None:
        while not self._stopping.wait(RESTART_DELAY_SEC):
            for index, proc in enumerate(self._procs):
                if proc.poll() is not None and not self._stopping.is_set():
                    log.warning(
                        "worker process %d exited with %s; starting another", proc.pid, proc.returncode
                    )
                    self._procs[index] = self._spawn(index)

    def stop(self, timeout: float = STOP_TIMEOUT_SEC) -> None:
        """SIGTERM: each worker hands its running trials back to the queue before it exits; one
        still running after `timeout` is killed (its leases lapse and other workers reap them)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()  # a restart it was making is in the list before the list is stopped
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in self._procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
