"""Real HTTP servers on loopback ports for the API, client and PostgreSQL tests.

The fixture `server` (API only) runs the API's app under uvicorn in a thread of the test's own
process: the same app and HTTP stack `el serve` runs, without an interpreter start and a process
stop per test (the tests of `el serve` itself start the command). `busy_server` (with a local
worker) runs the real `el serve`, as a team would. Both serve the test's store, SQLite or
PostgreSQL (parametrize `store_url`), with a key of the default project.
"""

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from envloop.client import Client
from envloop.console import api_and_console
from envloop.services import keys
from envloop.services.context import open_context
from tests.conftest import El, stop_process
from tests.ports import NotServing, serve_on_a_free_port


@dataclass
class Server:
    """A running server, a key of the default project, and `el` on the same store."""

    url: str
    key: str
    el: El
    log: Path
    """`el serve`'s output (a server in the test's process writes to the test's own)."""
    halt: Callable[[], None]
    proc: subprocess.Popen[bytes] | None = None
    """The `el serve` process; None for a server in the test's process."""
    clients: list[Client] = field(default_factory=list)

    def client(self, key: str | None = None) -> Client:
        client = Client(self.url, self.key if key is None else key)
        self.clients.append(client)
        return client

    def http(self, key: str | None = None) -> httpx.Client:
        token = self.key if key is None else key
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=60
        )

    def stop(self) -> None:
        for client in self.clients:
            client.close()
        self.halt()


def default_project_key(home: Path) -> str:
    """A new key of the default project, made in this process by the service `el key create` calls
    (its own tests run the command): one interpreter start less for every server a test starts."""
    context = open_context(home)
    try:
        return keys.create_key(context).key
    finally:
        context.close()


def start_server(el: El, log: Path, *args: str, host: str = "127.0.0.1") -> Server:
    key = default_project_key(el.home)
    env = dict(os.environ, ENVLOOP_HOME=str(el.home))

    def start(port: int) -> "subprocess.Popen[bytes]":
        with log.open("ab") as sink:
            return subprocess.Popen(
                [sys.executable, "-m", "envloop", "serve", "--host", host, "--port", str(port), *args],
                env=env,
                stdout=sink,
                stderr=sink,
            )

    with httpx.Client(timeout=5) as probe:  # one client for every try: a new one loads the CA bundle

        def answers(port: int) -> bool:
            try:
                return probe.get(f"http://127.0.0.1:{port}/v1/health").status_code == 200
            except httpx.TransportError:
                return False

        try:
            proc, port = serve_on_a_free_port(start, answers, timeout=90)
        except NotServing as exc:
            raise AssertionError(f"el serve {exc}: {log.read_text()}") from None
    return Server(
        url=f"http://127.0.0.1:{port}", key=key, el=el, log=log, halt=lambda: stop_process(proc), proc=proc
    )


def serve_in_process(el: El, log: Path, extend: Callable[[FastAPI], None] | None = None) -> Server:
    """The app `el serve` runs, on the store of `el`'s home and the environment's
    ENVLOOP_DATABASE_URL, under uvicorn in a thread, on a socket bound here (so no other server can
    take its port first); `extend` adds to the app (routes a test declares)."""
    key = default_project_key(el.home)
    context = open_context(el.home)
    app = api_and_console(context)
    if extend is not None:
        extend(app)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    # As `el serve` runs it, except that a request still streaming (a job followed to its end)
    # cannot hold the test's teardown up.
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5)
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()

    def halt() -> None:
        running.should_exit = True
        thread.join(timeout=60)
        listener.close()
        context.close()

    deadline = time.monotonic() + 60
    while not running.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            halt()
            raise AssertionError("the API did not start serving in time")
        time.sleep(0.01)
    port = listener.getsockname()[1]
    return Server(url=f"http://127.0.0.1:{port}", key=key, el=el, log=log, halt=halt)


@pytest.fixture
def server(el: El, store_url: str, tmp_path: Path) -> Iterator[Server]:
    """The API alone (no local workers): tests that run trials start workers themselves."""
    running = serve_in_process(el, tmp_path / "serve.log")
    yield running
    running.stop()


@pytest.fixture
def busy_server(el: El, store_url: str, tmp_path: Path) -> Iterator[Server]:
    """The API with one local worker process, as a team would run it."""
    running = start_server(el, tmp_path / "serve.log", "--workers", "1", "--capacity", "4")
    yield running
    running.stop()
