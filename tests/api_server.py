"""A real `el serve` (uvicorn on a loopback port) for the API, client and PostgreSQL tests.

The fixtures `server` (API only) and `busy_server` (with a local worker) run it against the test's
store, SQLite or PostgreSQL (parametrize `store_url`), with a key of the default project.
"""

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from envloop.client import Client
from tests.conftest import El


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """A running `el serve`, a key of the default project, and `el` on the same store."""

    url: str
    key: str
    el: El
    proc: subprocess.Popen[bytes]
    log: Path
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
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_server(el: El, log: Path, *args: str, host: str = "127.0.0.1") -> Server:
    key = el.ok("key", "create", "--json").json()["key"]
    port = free_port()
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "envloop", "serve", "--host", host, "--port", str(port), *args],
            env=dict(os.environ, ENVLOOP_HOME=str(el.home)),
            stdout=sink,
            stderr=sink,
        )
    server = Server(url=f"http://127.0.0.1:{port}", key=key, el=el, proc=proc, log=log)
    deadline = time.monotonic() + 90
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"el serve exited {proc.returncode}: {log.read_text()}")
        try:
            if httpx.get(f"{server.url}/v1/health", timeout=5).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise AssertionError(f"el serve did not answer in time: {log.read_text()}")
        time.sleep(0.1)


@pytest.fixture
def server(el: El, store_url: str, tmp_path: Path) -> Iterator[Server]:
    """The API alone (no local workers): tests that run trials start workers themselves."""
    running = start_server(el, tmp_path / "serve.log", "--workers", "0")
    yield running
    running.stop()


@pytest.fixture
def busy_server(el: El, store_url: str, tmp_path: Path) -> Iterator[Server]:
    """The API with one local worker process, as a team would run it."""
    running = start_server(el, tmp_path / "serve.log", "--workers", "1", "--capacity", "4")
    yield running
    running.stop()
