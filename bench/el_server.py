"""A real `el serve` for the benchmarks that measure the server (api.py, console.py, abuse.py): on a
free loopback port, without workers, stopped when the block ends."""

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

START_TIMEOUT_SEC = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def el_serve(env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """The server's base URL and process id, once it answers /v1/health."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "envloop", "serve", "--port", str(port), "--workers", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_SEC
        while True:
            try:
                if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("el serve did not start")
            time.sleep(0.1)
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=60)
