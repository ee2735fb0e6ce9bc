"""Latency of the HTTP API on a big job: GET of the job's result and of one page of its trials.

A job of 100 tasks x 1,000 attempts (100,000 trials) is submitted and every trial is marked
finished with a reward, straight in the store; then a real `el serve` (uvicorn, no workers) answers
8 concurrent clients, each asking for the result or a page of 100 trials at a random offset.
Figures: median and p99 latency per endpoint, and requests per second, on SQLite and PostgreSQL
(a throwaway server is started unless --postgres-url names one).

    .venv/bin/python bench/api.py [--trials 100000] [--clients 8] [--backend both]
"""

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from el_server import el_serve
from sqlalchemy import text, update

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the throwaway PostgreSQL server of the tests

from envloop.services import datasets, job_submission, keys, profiles  # noqa: E402
from envloop.services.context import open_context  # noqa: E402
from envloop.services.profiles import ProfileDocument, ProfileSpec  # noqa: E402
from envloop.store.queue import refresh_job_status  # noqa: E402
from envloop.store.tables import Trial  # noqa: E402
from tests import pg  # noqa: E402

TASKS = 100
PAGE = 100


def _tasks(root: Path, count: int) -> Path:
    for i in range(count):
        task = root / f"task-{i:03d}"
        (task / "tests").mkdir(parents=True)
        (task / "task.toml").write_text('version = "1.0"\n')
        (task / "instruction.md").write_text(f"Task {i}.\n")
        (task / "tests" / "test.sh").write_text("#!/usr/bin/env bash\necho 1 > /logs/verifier/reward.txt\n")
    return root


def _load(home: Path, trials: int) -> tuple[str, str]:
    """A finished job of `trials` trials (rewards 0/1, some missing); returns (job id, API key)."""
    ctx = open_context(home)
    attempts = trials // TASKS
    ref = datasets.push_dataset(ctx, _tasks(home / "src", TASKS), "bench").ref
    doc = ProfileDocument(
        schema_version="envplatform.profile/v2", spec=ProfileSpec(params={"AGENT_NAME": "nop"})
    )
    profiles.create_profile(ctx, "bench/nop", "1", doc)
    start = time.perf_counter()
    job_id = job_submission.submit_job(
        ctx, job_submission.JobRequest(dataset=ref, profiles=["bench/nop@1"], attempts=attempts)
    ).job.id
    submitted = time.perf_counter() - start
    with ctx.store.write_connection() as conn:
        conn.execute(
            update(Trial)
            .where(Trial.job_id == job_id)
            .values(status="completed", reward=(Trial.attempt % 2).cast(Trial.reward.type))
        )
        conn.execute(update(Trial).where(Trial.job_id == job_id, Trial.attempt % 10 == 0).values(reward=None))
        refresh_job_status(conn, job_id)
    if ctx.store.engine.dialect.name == "postgresql":
        # Fresh planner statistics, as autovacuum has them within a minute of a bulk change like this.
        with ctx.store.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE trials"))
    key = keys.create_key(ctx, "bench").key
    ctx.close()
    print(f"  submitted {trials} trials in {submitted:.2f} s")
    return job_id, key


def _measure(url: str, key: str, paths: list[str], clients: int) -> list[float]:
    """Send `paths` from `clients` threads at once; the latency of each request in seconds."""
    latencies: list[float] = []
    lock = threading.Lock()
    shares = [paths[i::clients] for i in range(clients)]

    def run(share: list[str]) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=300) as http:
            for path in share:
                start = time.perf_counter()
                response = http.get(path)
                elapsed = time.perf_counter() - start
                response.raise_for_status()
                with lock:
                    latencies.append(elapsed)

    threads = [threading.Thread(target=run, args=(share,)) for share in shares]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies


def _report(name: str, latencies: list[float], wall: float) -> None:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(
        f"  {name:<28} n={len(ordered):<5} median {statistics.median(ordered) * 1000:8.1f} ms"
        f"   p99 {p99 * 1000:8.1f} ms   {len(ordered) / wall:7.1f} req/s"
    )


def _bench(backend: str, url: str | None, args: argparse.Namespace) -> None:
    print(f"{backend}:")
    with tempfile.TemporaryDirectory(prefix="envloop-bench-") as tmp:
        home = Path(tmp) / "home"
        env = dict(os.environ, ENVLOOP_HOME=str(home))
        env.pop("ENVLOOP_DATABASE_URL", None)
        if url is not None:
            env["ENVLOOP_DATABASE_URL"] = url
            os.environ["ENVLOOP_DATABASE_URL"] = url
        else:
            os.environ.pop("ENVLOOP_DATABASE_URL", None)
        job_id, key = _load(home, args.trials)
        with el_serve(env) as (server, _):
            rng = random.Random(7)
            result_paths = [f"/v1/jobs/{job_id}/result"] * args.result_requests
            page_paths = [
                f"/v1/jobs/{job_id}/trials?limit={PAGE}&offset={rng.randrange(0, args.trials - PAGE)}"
                for _ in range(args.page_requests)
            ]
            _measure(server, key, result_paths[:2] + page_paths[:8], 2)  # warm-up
            for name, paths in (("GET job result", result_paths), (f"GET trials page ({PAGE})", page_paths)):
                start = time.perf_counter()
                latencies = _measure(server, key, paths, args.clients)
                _report(name, latencies, time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--result-requests", type=int, default=16)
    parser.add_argument("--page-requests", type=int, default=800)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--postgres-url", help="a PostgreSQL server to use (default: start one)")
    args = parser.parse_args()
    print(f"{args.trials} trials, {args.clients} concurrent clients, {os.cpu_count()} cores")
    if args.backend in ("sqlite", "both"):
        _bench("sqlite", None, args)
    if args.backend in ("postgresql", "both"):
        with _postgres(args.postgres_url) as server_url:
            databases = pg.Databases(server_url)
            try:
                with databases.fresh() as url:
                    _bench("postgresql", url, args)
            finally:
                databases.close()


@contextmanager
def _postgres(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    directory = Path(tempfile.mkdtemp(prefix="envloop-bench-pg-"))
    try:
        yield pg.start(directory)
    finally:
        pg.stop(directory)


if __name__ == "__main__":
    main()
