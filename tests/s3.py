"""A real S3-compatible server on loopback for the tests: moto in server mode, in its own process.

`server()` starts one (bounded in time) and stops it; `bucket_env(url)` makes a fresh bucket and
returns the standard AWS variables that point envloop (and botocore) at it.
"""

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import boto3
import httpx

from tests.conftest import stop_process
from tests.ports import free_port, listens

START_TIMEOUT_SEC = 30.0
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "envloop-test",
    "AWS_SECRET_ACCESS_KEY": "envloop-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextmanager
def server() -> Iterator[str]:
    """A moto S3 server on a free loopback port; yields its endpoint URL."""
    for _ in range(_BIND_TRIES):
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            if _answers(proc, url, port):
                yield url
                return
        finally:
            stop_process(proc, grace=10)
    raise RuntimeError(f"the moto S3 server found its port taken {_BIND_TRIES} times")


_BIND_TRIES = 3


def _answers(proc: subprocess.Popen[bytes], url: str, port: int) -> bool:
    """True once the server answers on its own port; False when it exited on a port another process
    had bound first (whatever answers there then is not this server)."""
    deadline = time.monotonic() + START_TIMEOUT_SEC
    with httpx.Client(timeout=1.0) as probe:  # one client for every try (see tests/api_server.py)
        while True:
            if proc.poll() is not None:
                if _taken(port):
                    return False
                raise RuntimeError(f"the moto S3 server exited with {proc.returncode} before it answered")
            try:
                probe.get(url)
                if listens(proc.pid, port):
                    return True
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the moto S3 server did not answer within 30 s")
            time.sleep(0.1)


def _taken(port: int) -> bool:
    """Whether another process listens on loopback `port` (it was not free after all)."""
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def bucket_env(endpoint: str) -> tuple[str, dict[str, str]]:
    """A new, empty bucket on the server: (its name, the AWS variables that reach it)."""
    env = {**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}
    name = f"envloop-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=env["AWS_DEFAULT_REGION"],
    )
    client.create_bucket(Bucket=name)
    return name, env


def child_env(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **extra}
