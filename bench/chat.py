"""`envloop/chat@1` on 1,000 prompts against the scripted endpoint: marginal milliseconds per attempt.

The endpoint runs in a process of its own (`python -m envloop.testing --answers`), answering every
prompt right, so the worker's figures are not mixed with the server's. A job runs on an in-process
worker against a real SQLite store; a 20-prompt warm-up job runs first (imports, SDK clients,
connections), so the figures are marginal. This runs `--repeat` times, each time on a fresh store,
and shows the best and the median: other processes on the machine only ever add time. The floor
makes the same calls with the bare SDK at the same concurrency: what any client pays for the round
trips alone.

    .venv/bin/python bench/chat.py [--prompts 1000] [--capacity 16] [--max-concurrency N]
                                   [--protocol openai|anthropic] [--repeat 3]
"""

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import openai

from envloop.scheduling.worker import Worker, WorkerConfig
from envloop.services import datasets, job_submission, jobs, profiles, results
from envloop.services.context import open_context

TARGET_MS = 3.5
WARM_UP = 20


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _rows(count: int, prefix: str) -> list[dict[str, str]]:
    return [
        {"id": f"{prefix}{i}", "prompt": f"{prefix}: {i} + {i}?", "answer": str(2 * i)} for i in range(count)
    ]


def _write_jsonl(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _start_endpoint(answers: Path) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "envloop.testing", "--answers", str(answers)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


def _run_job(home: Path, dataset: str, count: int, capacity: int) -> tuple[float, float, float | None]:
    ctx = open_context(home)
    request = job_submission.JobRequest(dataset=dataset, profiles=["bench/endpoint@1"], attempts=1)
    job_id = job_submission.submit_job(ctx, request).job.id
    worker = Worker(ctx, WorkerConfig(capacity=capacity, idle_poll=0.01))
    start_wall, start_cpu = time.perf_counter(), _cpu()
    asyncio.run(worker.run(until=lambda: worker.completed >= count))
    wall, cpu = time.perf_counter() - start_wall, _cpu() - start_cpu
    view = jobs.get_job(ctx, job_id)
    assert view.counts.get("completed") == count, view.counts
    score = results.job_result(ctx, job_id).profiles["bench/endpoint@1"].score
    ctx.close()
    return wall, cpu, score


async def _floor(root_url: str, protocol: str, prompts: list[str], in_flight: int) -> tuple[float, float]:
    """The same calls straight through the SDK's own request method, at the same concurrency."""
    gate = asyncio.Semaphore(in_flight)
    if protocol == "anthropic":
        # Imported here only: a second SDK's objects in memory slow the worker's garbage collector.
        import anthropic  # noqa: PLC0415

        client: Any = anthropic.AsyncAnthropic(base_url=root_url, api_key="bench", max_retries=0)
        call = client.messages.create
        extra = {"max_tokens": 1024}
    else:
        client = openai.AsyncOpenAI(base_url=root_url + "/v1", api_key="bench", max_retries=0)
        call, extra = client.chat.completions.create, {}

    async def one(prompt: str) -> None:
        async with gate:
            await call(model="m", messages=[{"role": "user", "content": prompt}], **extra)

    await asyncio.gather(*(one(p) for p in prompts[:WARM_UP]))
    start_wall, start_cpu = time.perf_counter(), _cpu()
    await asyncio.gather(*(one(p) for p in prompts))
    figures = time.perf_counter() - start_wall, _cpu() - start_cpu
    await client.close()
    return figures


def _profile(root: Path, base_url: str, protocol: str, in_flight: int) -> Path:
    params = {"MODEL_PROTOCOL": protocol, "MODEL_BASE_URL": base_url, "MODEL_NAME": "bench-model"}
    params |= {"MODEL_API_KEY": "bench-key", "MAX_CONCURRENCY": str(in_flight)}
    document = {"schema_version": "envplatform.profile/v2", "secret_params": ["MODEL_API_KEY"]}
    path = root / "profile.json"
    path.write_text(json.dumps({**document, "spec": {"params": params}}))
    return path


def _fresh_home(root: Path, run: int) -> Path:
    home = root / f"home-{run}"
    os.environ["ENVLOOP_HOME"] = str(home)
    ctx = open_context(home)
    datasets.push_dataset(ctx, root / "warm.jsonl", "warm", scorer="exact")
    datasets.push_dataset(ctx, root / "bench.jsonl", "bench", scorer="exact")
    profiles.create_profile(ctx, "bench/endpoint", "1", profiles.read_profile_file(root / "profile.json"))
    ctx.close()
    return home


def _report(args: argparse.Namespace, in_flight: int, runs: list[tuple[float, float, float | None]],
            floors: list[tuple[float, float]]) -> None:  # fmt: skip
    n = args.prompts
    setup = f"capacity {args.capacity}, {in_flight} calls in flight, {os.cpu_count()} cores"
    print(f"{n} prompts, envloop/chat@1 over {args.protocol}, {setup}; best and median of {args.repeat}")
    print(f"{'':<20}{'attempts/s':>11}{'wall ms/attempt':>17}{'cpu ms/attempt':>16}{'median wall':>13}")
    for label, figures in (("envloop (marginal)", [r[:2] for r in runs]), ("bare SDK calls", floors)):
        wall, cpu = min(figures)
        median = sorted(f[0] for f in figures)[len(figures) // 2]
        figures_ms = f"{wall / n * 1000:>17.2f}{cpu / n * 1000:>16.2f}{median / n * 1000:>13.2f}"
        print(f"{label:<20}{n / wall:>11.1f}{figures_ms}")
    print("each run, wall ms/attempt: " + ", ".join(f"{r[0] / n * 1000:.2f}" for r in runs))
    best = min(r[0] for r in runs) / n * 1000
    scores = sorted({r[2] for r in runs}, key=str)
    verdict = "met" if best <= TARGET_MS else "NOT met"
    print(f"target ≤ {TARGET_MS} ms per attempt: {verdict}; job scores {scores} (every answer is right)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--capacity", type=int, default=16)
    parser.add_argument(
        "--max-concurrency", type=int, help="the profile's MAX_CONCURRENCY (default: capacity)"
    )
    parser.add_argument("--protocol", choices=["openai", "anthropic"], default="openai")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    in_flight = args.max_concurrency or args.capacity
    root = Path(tempfile.mkdtemp(prefix="envloop-bench-chat-"))
    server: subprocess.Popen[str] | None = None
    try:
        warm, rows = _rows(WARM_UP, "warm"), _rows(args.prompts, "q")
        server, url = _start_endpoint(_write_jsonl(root / "answers.jsonl", warm + rows))
        _write_jsonl(root / "warm.jsonl", warm)
        _write_jsonl(root / "bench.jsonl", rows)
        base_url = url + "/v1" if args.protocol == "openai" else url
        _profile(root, base_url, args.protocol, in_flight)
        runs = []
        for run in range(args.repeat):  # each run on a fresh store, warmed up first
            home = _fresh_home(root, run)
            _run_job(home, "warm@1", WARM_UP, args.capacity)
            runs.append(_run_job(home, "bench@1", args.prompts, args.capacity))
        prompts = [r["prompt"] for r in rows]
        floors = [asyncio.run(_floor(url, args.protocol, prompts, in_flight)) for _ in range(args.repeat)]
        _report(args, in_flight, runs, floors)
        requests = (WARM_UP + args.prompts) * args.repeat * 2
        print(f"endpoint process cpu: {_process_cpu(server.pid) / requests * 1000:.2f} ms per request")
        print(f"load average at the end: {os.getloadavg()[0]:.2f} (other processes share the cores)")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak memory of the worker process: {peak:.0f} MiB")
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


def _process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
