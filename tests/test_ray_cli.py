"""`el worker --executor`: bad choices are refused as bad input, and a Ray cluster that is not there
is one line and exit 4 within seconds, never a worker waiting without end."""

import socket
import time

import pytest

from tests.conftest import El


def _one_line(result: object, code: int) -> str:
    stderr: str = result.stderr.strip()  # type: ignore[attr-defined]
    assert result.code == code, stderr  # type: ignore[attr-defined]
    assert len(stderr.splitlines()) == 1, stderr
    assert "Traceback" not in stderr
    return stderr


def test_an_unknown_executor_is_refused_as_bad_input(el: El) -> None:
    assert "expected local or ray" in _one_line(el("worker", "--executor", "kubernetes"), 2)


def test_a_ray_address_without_the_ray_executor_is_refused_as_bad_input(el: El) -> None:
    assert "--executor ray" in _one_line(el("worker", "--ray-address", "127.0.0.2:26380"), 2)


@pytest.mark.ray
def test_a_ray_cluster_that_is_not_there_is_one_line_and_exit_4_within_seconds(el: El) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed (scripts/setup installs it)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.2", 0))
        address = f"127.0.0.2:{sock.getsockname()[1]}"
    started = time.monotonic()
    result = el("worker", "--executor", "ray", "--ray-address", address, timeout=60)
    assert f"could not reach the Ray cluster at {address}" in _one_line(result, 4)
    assert time.monotonic() - started < 30
