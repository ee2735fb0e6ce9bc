"""A real S3-compatible server on loopback for the tests: moto in server mode, in its own process.

`server()` starts one (bounded in time) and stops it; `bucket_env(url)` makes a fresh bucket and
returns the standard AWS variables that point envloop (and botocore) at it.
"""

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import boto3
import httpx

from tests.conftest import stop_process
from tests.ports import NotServing, serve_on_a_free_port

START_TIMEOUT_SEC = 30.0
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "envloop-test",
    "AWS_SECRET_ACCESS_KEY": "envloop-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextmanager
def server() -> Iterator[str]:
    """A moto S3 server on a free loopback port; yields its endpoint URL."""

    def start(port: int) -> "subprocess.Popen[bytes]":
        return subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    with httpx.Client(timeout=1.0) as probe:  # one client for every try (see tests/api_server.py)

        def answers(port: int) -> bool:
            try:
                probe.get(f"http://127.0.0.1:{port}")
            except httpx.TransportError:
                return False
            return True

        try:
            proc, port = serve_on_a_free_port(start, answers, timeout=START_TIMEOUT_SEC)
        except NotServing as exc:
            raise RuntimeError(f"the moto S3 server {exc}") from None
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc, grace=10)


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
