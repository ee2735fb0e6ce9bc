"""The server under abuse: credentials before bodies, capped bodies and archives, logs read in
pages or streamed, and one error shape (`{"detail": "one line"}`, 400 not 422) for every 4xx."""

import io
import json
import os
import socket
import tarfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from envloop.services.context import Context
from tests.api_server import Server, serve_in_process
from tests.conftest import El
from tests.test_compare_support import make_profile, push_tasks, run_job

MIB = 1024 * 1024


def _raw_post(server: Server, path: str, length: int, token: str | None) -> str:
    """Send only the headers of a POST that promises `length` bytes; return the status line the
    server answers with before any of the body arrives (a server that waits for it times out)."""
    host, port = server.url.removeprefix("http://").split(":")
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n{auth}\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode())
        answer = sock.recv(65536).decode("latin-1")
    return answer.splitlines()[0]


def test_an_anonymous_body_is_refused_before_it_is_read(server: Server) -> None:
    assert _raw_post(server, "/v1/jobs", 100 * MIB, None).endswith("401 Unauthorized")
    assert _raw_post(server, "/v1/jobs", 1000, "elk_not-a-key").endswith("401 Unauthorized")


def test_a_declared_body_over_the_limit_is_refused_with_413_before_it_is_read(server: Server) -> None:
    assert _raw_post(server, "/v1/jobs", 2 * MIB, server.key).endswith("413 Request Entity Too Large")
    with server.http() as http:
        answer = http.post("/v1/jobs", content=b"x" * (2 * MIB), headers={"Content-Type": "application/json"})
    assert answer.status_code == 413
    assert answer.json() == {"detail": "the request body is larger than the limit of 1 MiB"}


def test_a_streamed_body_without_a_length_is_cut_off_at_the_limit(server: Server) -> None:
    sent = 0

    def body() -> Iterator[bytes]:
        nonlocal sent
        for _ in range(64):
            sent += MIB // 4
            yield b" " * (MIB // 4)

    with server.http() as http:
        try:
            answer = http.post("/v1/jobs", content=body(), headers={"Content-Type": "application/json"})
        except httpx.TransportError:  # the server may close before the client finishes sending
            assert sent < 16 * MIB
            return
    assert answer.status_code == 413 and "1 MiB" in answer.json()["detail"]


@pytest.fixture
def small_upload_server(
    el: El, store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Server]:
    monkeypatch.setenv("ENVLOOP_MAX_UPLOAD_MB", "1")
    running = serve_in_process(el, tmp_path / "serve.log")
    yield running
    running.stop()


def _archive(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


TASK = {
    "bomb/task.toml": b'version = "1.0"\n',
    "bomb/instruction.md": b"Do it.\n",
    "bomb/environment/Dockerfile": b"FROM debian:bookworm-slim\n",
    "bomb/tests/test.sh": b"echo 1 > /logs/verifier/reward.txt\n",
}


def test_uploads_are_capped_in_size_and_in_what_they_unpack_to(small_upload_server: Server) -> None:
    bomb = _archive({**TASK, "bomb/environment/zeros.bin": bytes(3 * MIB)})
    assert len(bomb) < 100_000
    with small_upload_server.http() as http:
        unpacked = http.post("/v1/datasets", data={"name": "bomb"}, files={"archive": ("bomb.tar.gz", bomb)})
        assert unpacked.status_code == 400, unpacked.text
        assert f"content larger than {2 * MIB} bytes" in unpacked.json()["detail"]
        assert "/tmp" not in unpacked.json()["detail"]
        big = _archive({**TASK, "bomb/environment/noise.bin": os.urandom(2 * MIB)})
        refused = http.post("/v1/datasets", data={"name": "big"}, files={"archive": ("big.tar.gz", big)})
        assert refused.status_code == 413 and "1 MiB" in refused.json()["detail"]
        assert http.get("/v1/datasets").json() == []


def test_requests_that_do_not_fit_an_operation_get_400_with_one_line(server: Server) -> None:
    with server.http() as http:
        bad = http.post("/v1/jobs", json={"dataset": "d@1", "profiles": ["p@1"], "attempts": 0})
        assert bad.status_code == 400
        assert bad.json() == {"detail": "body.attempts: Input should be greater than or equal to 1"}
        missing = http.post("/v1/jobs", content=b"{not json", headers={"Content-Type": "application/json"})
        assert missing.status_code == 400 and isinstance(missing.json()["detail"], str)
        query = http.get("/v1/jobs", params={"limit": "many"})
        assert query.status_code == 400 and query.json()["detail"].startswith("query.limit:")
    document = httpx.get(f"{server.url}/openapi.json", timeout=30).json()
    responses = [op["responses"] for ops in document["paths"].values() for op in ops.values()]
    assert not any("422" in r for r in responses)
    assert "HTTPValidationError" not in document["components"]["schemas"]


def test_a_long_log_is_read_in_pages_over_the_api_and_streamed_whole_by_el(
    server: Server, ctx: Context, tmp_path: Path
) -> None:
    dataset = push_tasks(ctx, tmp_path, "long", ["t1"])
    profile = make_profile(ctx, tmp_path, "team/long")
    job = run_job(ctx, dataset, [profile], 1, lambda *_: 1.0)
    with server.http() as http:
        trial = http.get(f"/v1/jobs/{job}/trials").json()[0]["id"]
        log = ctx.artifacts.trial_dir(trial) / "agent" / "stdout.txt"
        log.parent.mkdir(parents=True, exist_ok=True)
        lines = b"".join(b"line %07d\n" % i for i in range(400_000))  # 5.2 MB
        log.write_bytes(lines)
        page = http.get(f"/v1/trials/{trial}/logs", params={"phase": "agent"}).json()
        assert page["stdout"].encode() == lines[:MIB]
        later = http.get(
            f"/v1/trials/{trial}/logs", params={"phase": "agent", "offset": 5 * MIB, "limit": 100}
        )
        assert later.json()["stdout"].encode() == lines[5 * MIB : 5 * MIB + 100]
        assert http.get(f"/v1/trials/{trial}/logs", params={"limit": 2 * MIB}).status_code == 400
        ranged = http.get(f"/v1/trials/{trial}/artifacts/agent/stdout.txt", headers={"Range": "bytes=10-19"})
        assert ranged.status_code == 206 and ranged.content == lines[10:20]
    remote = {"ENVLOOP_URL": server.url, "ENVLOOP_API_KEY": server.key}
    for env in (None, remote):
        shown = server.el("trial", "logs", trial, env=env)
        assert shown.code == 0, shown.stderr
        assert shown.stdout.encode() == lines
    paged = server.el("trial", "logs", trial, "--json", "--offset", "11", "--limit", "11", env=remote)
    assert json.loads(paged.stdout) == {"stdout": lines[11:22].decode()}


def test_an_over_long_name_in_an_upload_is_refused_with_400_and_one_line(server: Server) -> None:
    long_entry = _archive({**TASK, f"bomb/environment/{'n' * 300}.txt": b"x"})
    deep = _archive({**TASK, "bomb/" + "/".join(["d" * 200] * 25) + "/f": b"x"})
    with server.http() as http:
        for archive, expected in (
            (long_entry, "a name of 304 bytes is longer than the 255 allowed"),
            (deep, "a path of 5031 bytes is longer than the 4096 allowed"),
        ):
            upload = {"archive": ("t.tar.gz", archive)}
            refused = http.post("/v1/datasets", data={"name": "long"}, files=upload)
            assert refused.status_code == 400, refused.text
            detail = refused.json()["detail"]
            assert expected in detail and "\n" not in detail and "/tmp" not in detail
        named = http.post(
            "/v1/datasets", data={"name": "long"}, files={"archive": ("a" * 300 + ".tar.gz", _archive(TASK))}
        )
        assert named.status_code == 400, named.text
        assert "file name of 307 bytes is longer than the 255 allowed" in named.json()["detail"]
        assert http.get("/v1/datasets").json() == []
