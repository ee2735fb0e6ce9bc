"""The local model's throughput during the demo: SmolLM2-135M-Instruct under llama.cpp answering
the demo's evaluation (`envloop/chat@1` on `examples/qa/basics.jsonl`, the demo profile, three
attempts per question) run by an in-process worker on a real SQLite store.

Printed: wall time, model calls per second, generated (completion) and prompt tokens per second
over the job's wall time, each call's latency as the trial saw it (median and 90th percentile),
and the job's score with its coverage. llama.cpp's server answers one request at a time, so more
worker capacity mostly queues calls at the endpoint; `--threads` is what speeds generation.

    .venv/bin/python bench/local_model.py [--attempts 3] [--threads N] [--capacity N]
"""

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from envloop.core.trajectory import ModelStep
from envloop.models.local import LocalModelConfig, LocalModelServer
from envloop.scheduling.worker import Worker, WorkerConfig
from envloop.services import datasets, job_submission, jobs, profiles, results, trace, trials
from envloop.services.context import Context, open_context

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = REPO / "examples" / "qa" / "basics.jsonl"
PROFILE = REPO / "examples" / "profiles" / "smollm2.json"


def _setup(ctx: Context, base_url: str, root: Path) -> None:
    datasets.push_dataset(ctx, QUESTIONS, "demo-qa", scorer="regex")
    document = json.loads(PROFILE.read_text())
    document["spec"]["params"]["MODEL_BASE_URL"] = base_url
    path = root / "profile.json"
    path.write_text(json.dumps(document))
    profiles.create_profile(ctx, "demo/smollm2", "1", profiles.read_profile_file(path))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--capacity", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="envloop-bench-local-model-"))
    os.environ["ENVLOOP_HOME"] = str(root / "home")
    ctx = open_context(root / "home")
    config = LocalModelConfig(port=0, threads=args.threads)
    with LocalModelServer(config, log_path=root / "server.log") as server:
        _setup(ctx, server.base_url, root)
        request = job_submission.JobRequest(
            dataset="demo-qa@1", profiles=["demo/smollm2@1"], attempts=args.attempts
        )
        job_id = job_submission.submit_job(ctx, request).job.id
        count = len(jobs.get_job(ctx, job_id).tasks) * args.attempts
        worker = Worker(ctx, WorkerConfig(capacity=args.capacity, idle_poll=0.01))
        started = time.perf_counter()
        asyncio.run(worker.run(until=lambda: worker.completed >= count))
        wall = time.perf_counter() - started
    calls = []
    for view in trials.list_trials(ctx, job_id):
        trajectory = trace.trial_steps(ctx, view.id)
        assert trajectory is not None
        calls += [s for s in trajectory.steps if isinstance(s, ModelStep) and s.error is None]
    output = sum(c.usage.output_tokens for c in calls)
    prompt = sum(c.usage.input_tokens for c in calls)
    latencies = sorted(c.duration_ms or 0 for c in calls)
    summary = results.job_result(ctx, job_id).profiles["demo/smollm2@1"]
    counts = summary.score_counts
    ctx.close()
    print(
        f"SmolLM2-135M-Instruct (Q4_1, llama.cpp, {args.threads} threads), worker capacity {args.capacity}, "
        f"{os.cpu_count()} cores"
    )
    print(f"  {count} trials ({count // args.attempts} questions × {args.attempts}) in {wall:.1f} s")
    print(f"  model calls          {len(calls) / wall:8.2f} /s")
    print(
        f"  generated tokens     {output / wall:8.1f} /s   "
        f"({output} in all, {output / len(calls):.1f} per call)"
    )
    print(f"  prompt tokens        {prompt / wall:8.1f} /s   ({prompt} in all)")
    p90 = latencies[int(0.9 * (len(latencies) - 1))]
    print(f"  call latency         median {statistics.median(latencies):.0f} ms, p90 {p90:.0f} ms")
    score = "—" if summary.score is None else f"{summary.score:.1%}"
    print(f"  score {score}, {counts.scored}/{counts.total} attempts scored")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (other processes share the cores)")


if __name__ == "__main__":
    main()
