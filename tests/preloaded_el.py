"""`el` for the tests: each call forked from a process that imported `el`'s modules once.

Each call is still a process of its own. It has its own argv, environment, working directory, stdio
and exit code, and it runs `python -m envloop` as a user's shell does. It skips the interpreter's
start and the imports every command repeats: 0.3 to 1.5 s of CPU a call, over about 700 calls in the
suite. A call whose environment changes how Python starts (a `PYTHON*` variable) gets a fresh
interpreter instead. The tests of start-up and imports (test_cli_startup.py, test_light_imports.py)
start their own interpreters, since a fork inherits every module its parent loaded.

The preloading process (`python -m tests.preloaded_el SOCKET`) serves a Unix socket. A request is
one message, the call as JSON, with its stdout and stderr files attached (SCM_RIGHTS). The reply is
the child's pid, then its exit code as `subprocess` reports it (-N for a signal).
"""

import atexit
import contextlib
import ctypes
import gc
import importlib
import io
import json
import locale
import os
import pkgutil
import runpy
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
_PR_SET_PDEATHSIG = 1
_MESSAGE_MAX = 1 << 20
PACKAGES = ("envloop.cli", "envloop.services", "envloop.store", "envloop.wire")
"""Packages whose modules the preloading process imports: every command's shared cost."""


def _preload() -> None:
    for package in PACKAGES:
        module = importlib.import_module(package)
        for info in pkgutil.iter_modules(module.__path__, f"{package}."):
            importlib.import_module(info.name)
    importlib.import_module("sqlalchemy.dialects.sqlite")
    if threading.active_count() != 1:  # a fork keeps only the calling thread
        raise RuntimeError(f"preloading started threads: {threading.enumerate()}")


def _become_el(request: dict[str, Any], stdout: int, stderr: int) -> None:
    """In the forked child: take the call's stdio, directory and environment, and run `el`."""
    stdin = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = request["cwd"]  # as `python -m` puts its working directory first
    sys.argv = ["el", *request["args"]]
    runpy.run_module("envloop", run_name="__main__", alter_sys=True)


def serve(path: str) -> None:
    """Preload, then fork a child per request until the test process that started this one dies.

    No `finally` and no `with` here: a child leaves through this function too (SystemExit from
    `el`, or its exception), and must not run the server's clean-up on its way out.
    """
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    _preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    calls: dict[int, tuple[int, socket.socket]] = {}  # pidfd: (pid, connection)
    gc.collect()
    gc.freeze()  # the children's collections skip the preloaded objects: fewer pages copied
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.fileobj is listener:
                connection, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(connection, _MESSAGE_MAX, 2)
                if not message or len(fds) != 2:  # a caller that went away: serve the others
                    for fd in fds:
                        os.close(fd)
                    connection.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    listener.close()
                    connection.close()
                    for pidfd, (_, other) in calls.items():
                        os.close(pidfd)
                        other.close()
                    _become_el(json.loads(message), *fds)
                    raise SystemExit(0)
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                calls[pidfd] = (pid, connection)
                selector.register(pidfd, selectors.EVENT_READ)
                with contextlib.suppress(OSError):  # its caller may have gone: serve the others
                    connection.send(f"{pid}".encode())
            else:
                pidfd = int(key.fd)
                selector.unregister(pidfd)
                os.close(pidfd)
                pid, connection = calls.pop(pidfd)
                _, status = os.waitpid(pid, 0)
                with contextlib.suppress(OSError):
                    connection.send(f"{os.waitstatus_to_exitcode(status)}".encode())
                connection.close()


@dataclass
class Preloaded:
    """The test process's preloading process, started at its first call."""

    environ: dict[str, str]
    process: "subprocess.Popen[str] | None" = None
    path: str = ""
    starting: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        atexit.register(self.close)

    def runs(self, env: dict[str, str]) -> bool:
        """Whether a call with this environment can be forked: Python's own settings unchanged."""

        def python_vars(environ: dict[str, str]) -> dict[str, str]:
            return {name: value for name, value in environ.items() if name.startswith("PYTHON")}

        return python_vars(env) == python_vars(self.environ)

    def run(
        self, args: tuple[str, ...], env: dict[str, str], cwd: Path, timeout: float
    ) -> tuple[int, str, str]:
        """Run `el ARGS` as `subprocess.run(capture_output=True, text=True)` would: (code, out, err)."""
        path = self._started()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            request = json.dumps({"args": list(args), "env": env, "cwd": str(cwd)}).encode()
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as connection:
                connection.connect(path)
                socket.send_fds(connection, [request], [out.fileno(), err.fileno()])
                pid = _number(connection.recv(64))
                connection.settimeout(timeout)
                try:
                    code = _number(connection.recv(64))
                except TimeoutError:
                    os.kill(pid, signal.SIGKILL)
                    connection.settimeout(None)
                    connection.recv(64)
                    raise subprocess.TimeoutExpired(
                        [sys.executable, "-m", "envloop", *args], timeout, _text(out), _text(err)
                    ) from None
            return code, _text(out), _text(err)

    def close(self) -> None:
        """End the preloading process and remove its socket (at the test process's exit)."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait()
            self.process = None
        if self.path:
            shutil.rmtree(Path(self.path).parent, ignore_errors=True)
            self.path = ""

    def _started(self) -> str:
        with self.starting:  # a test's threads may make its first calls at once
            if self.process is None or self.process.poll() is not None:
                self._start()
        return self.path

    def _start(self) -> None:
        self.close()
        self.path = str(Path(tempfile.mkdtemp(prefix="el-preloaded-")) / "socket")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.preloaded_el", self.path],
            cwd=REPO,
            env=self.environ,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the preloading process exited {self.process.wait()}")


def _number(reply: bytes) -> int:
    if not reply:
        raise RuntimeError("the preloading process ended during an el call (its stderr is the test's)")
    return int(reply)


def _text(file: Any) -> str:
    """A call's output as `subprocess.run(text=True)` decodes it: the locale's encoding, any newline."""
    file.seek(0)
    return io.TextIOWrapper(io.BytesIO(file.read()), encoding=locale.getpreferredencoding(False)).read()


if __name__ == "__main__":
    serve(sys.argv[1])
