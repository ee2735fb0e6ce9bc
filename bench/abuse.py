"""The server's memory under abuse: what one hostile request costs a real `el serve`.

A trial with a long agent log (default 1.1 GB, sparse on disk) is recorded straight in the store,
then a real `el serve` (uvicorn, no workers) gets, one at a time: a read of that log through
`GET /v1/trials/{id}/logs`, the whole log streamed from its artifact, an anonymous 100 MB POST, an
authenticated 100 MB POST, and a dataset upload that is a gzip bomb (under a megabyte, unpacking
to about a gigabyte). Figures: the server's resident memory before and at its peak during each
request (sampled every 10 ms), the status it answered and how long it took.

    .venv/bin/python bench/abuse.py [--log-mb 1100] [--post-mb 100] [--bomb-mb 1000]
"""

import argparse
import io
import os
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path

import httpx
import psutil
from el_server import el_serve

from envloop.core.trial import TrialOutcome
from envloop.services import datasets, job_submission, keys, profiles
from envloop.services.context import open_context
from envloop.services.profiles import ProfileDocument, ProfileSpec
from envloop.store import queue

MB = 1_000_000


def _load(home: Path, log_bytes: int) -> tuple[str, str]:
    """One finished trial whose agent log is `log_bytes` long; returns (trial id, API key)."""
    ctx = open_context(home)
    task = home / "src" / "t"
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text('version = "1.0"\n')
    (task / "instruction.md").write_text("Do it.\n")
    (task / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    ref = datasets.push_dataset(ctx, home / "src", "abuse").ref
    doc = ProfileDocument(
        schema_version="envplatform.profile/v2", spec=ProfileSpec(params={"AGENT_NAME": "nop"})
    )
    profiles.create_profile(ctx, "bench/nop", "1", doc)
    job_submission.submit_job(ctx, job_submission.JobRequest(dataset=ref, profiles=["bench/nop@1"]))
    (claimed,) = queue.claim(ctx.store, "bench", 10, 3600)
    queue.finish(ctx.store, claimed, TrialOutcome(status="completed", reward=1.0))
    log = ctx.artifacts.trial_dir(claimed.trial_id) / "agent" / "stdout.txt"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as handle:
        handle.write(b"start of a long log\n")
        handle.truncate(log_bytes)
    key = keys.create_key(ctx, "bench").key
    ctx.close()
    return claimed.trial_id, key


def _rss(process: psutil.Process) -> int:
    total = 0
    for p in [process, *process.children(recursive=True)]:
        with suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total


def _measure(process: psutil.Process, label: str, request: Callable[[], str]) -> None:
    before = _rss(process)
    peak = before
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _rss(process))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start = time.perf_counter()
    try:
        outcome = request()
    except httpx.HTTPError as exc:
        outcome = f"connection ended ({type(exc).__name__})"
    finally:
        done.set()
        sampler.join()
    seconds = time.perf_counter() - start
    print(f"  {label:<48} {outcome:<28} {before / MB:7.0f} MB -> peak {peak / MB:7.0f} MB  {seconds:6.2f} s")


def _body(size: int) -> Iterator[bytes]:
    chunk = b" " * (1 << 20)
    for _ in range(size // len(chunk)):
        yield chunk


def _bomb(unpacked: int) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=9) as tar:
        for name, data in {"bomb/task.toml": b'version = "1.0"\n', "bomb/instruction.md": b"x\n"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("bomb/environment/zeros.bin")
        info.size = unpacked
        tar.addfile(info, _Zeros(unpacked))
    return buffer.getvalue()


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readinto(self, target: "bytearray | memoryview") -> int:  # type: ignore[override]
        size = min(len(target), self.left)
        target[:size] = bytes(size)
        self.left -= size
        return size


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--log-mb", type=int, default=1100)
    parser.add_argument("--post-mb", type=int, default=100)
    parser.add_argument("--bomb-mb", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envloop-abuse-") as tmp:
        home = Path(tmp) / "home"
        trial, key = _load(home, args.log_mb * MB)
        bomb = _bomb(args.bomb_mb * MB)
        print(
            f"log of {args.log_mb} MB, POST bodies of {args.post_mb} MB, gzip bomb of {len(bomb) / MB:.2f} MB"
        )
        with el_serve(dict(os.environ, ENVLOOP_HOME=str(home))) as (url, pid):
            process = psutil.Process(pid)
            auth = {"Authorization": f"Bearer {key}"}
            with httpx.Client(base_url=url, timeout=600) as http:

                def logs() -> str:
                    answer = http.get(f"/v1/trials/{trial}/logs", params={"phase": "agent"}, headers=auth)
                    return f"{answer.status_code}, {len(answer.content) / MB:.1f} MB"

                def stream() -> str:
                    size = 0
                    url_path = f"/v1/trials/{trial}/artifacts/agent/stdout.txt"
                    with http.stream("GET", url_path, headers=auth) as answer:
                        for chunk in answer.iter_bytes():
                            size += len(chunk)
                    return f"{answer.status_code}, {size / MB:.0f} MB streamed"

                def post(headers: dict[str, str]) -> Callable[[], str]:
                    def send() -> str:
                        answer = http.post(
                            "/v1/jobs",
                            content=_body(args.post_mb * MB),
                            headers={**headers, "Content-Type": "application/json"},
                        )
                        return str(answer.status_code)

                    return send

                def upload() -> str:
                    files = {"archive": ("bomb.tar.gz", bomb)}
                    answer = http.post("/v1/datasets", data={"name": "bomb"}, files=files, headers=auth)
                    return str(answer.status_code)

                _measure(process, "GET /logs of the long log", logs)
                _measure(process, "GET the log's artifact, streamed whole", stream)
                _measure(process, f"anonymous POST of {args.post_mb} MB", post({}))
                _measure(process, f"authenticated POST of {args.post_mb} MB", post(auth))
                _measure(process, f"upload of a gzip bomb ({args.bomb_mb} MB unpacked)", upload)


if __name__ == "__main__":
    main()
