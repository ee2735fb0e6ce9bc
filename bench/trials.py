"""Throughput of trivial trials as users run them, in both sandbox modes, against the bare cost of
the same processes; with the old in-process figure beside it.

Each trial: the `command` agent runs `true`, the verifier writes 1.

- CLI, distinct tasks (the realistic shape, and the default): N distinct tasks x 1 attempt, through
  the CLI on a fresh `ENVLOOP_HOME` (`el dataset push`, `el profile create`, `el job submit --wait`;
  a background worker at `--capacity` is started first, its start counted). Marginal per trial:
  (run of N - run of 1 task) / (N - 1); CPU includes the `el` follower, the worker and its sandboxes.
- in-process, one task (the old figure): one task x N attempts on an in-process worker against the
  same kind of store, after a 20-trial warm-up job: no command start, no follower, one task archive.
- floor: the same two processes per trial (agent, verifier) spawned directly, and inside bwrap, at
  the same concurrency.

Last, a one-trial job end to end (`el job submit --wait` with the worker it starts, cold).

    .venv/bin/python bench/trials.py [--trials 1000] [--capacity 4] [--dir DIR]
"""

import argparse
import asyncio
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import cli_runs
import floors

from envloop.environments.bwrap import bwrap_executable
from envloop.scheduling.worker import Worker, WorkerConfig
from envloop.services import datasets, jobs, profiles
from envloop.services.context import open_context


def _in_process_job(home: Path, trials: int, capacity: int) -> tuple[float, float]:
    ctx = open_context(home)
    request = jobs.JobRequest(dataset="bench@1", profiles=["bench/agent@1"], attempts=trials)
    job_id = jobs.submit_job(ctx, request).job.id
    worker = Worker(ctx, WorkerConfig(capacity=capacity, idle_poll=0.01))
    start_wall, start_cpu = time.perf_counter(), floors.cpu_seconds()
    asyncio.run(worker.run(until=lambda: worker.completed >= trials))
    wall, cpu = time.perf_counter() - start_wall, floors.cpu_seconds() - start_cpu
    view = jobs.get_job(ctx, job_id)
    assert view.counts["completed"] == trials, view.counts
    ctx.close()
    return wall, cpu


def _in_process(root: Path, mode: str, trials: int, capacity: int, profile: Path) -> tuple[float, float]:
    """The old figure: one task, many attempts, a warm in-process worker."""
    home = root / f"in-process-{mode}"
    os.environ["ENVLOOP_HOME"], os.environ["ENVLOOP_SANDBOX"] = str(home), mode
    ctx = open_context(home)
    datasets.push_dataset(ctx, root / "tasks-1", "bench")
    profiles.create_profile(ctx, "bench/agent", "1", profiles.read_profile_file(profile))
    ctx.close()
    _in_process_job(home, 20, capacity)  # warm-up: imports, first launch, caches
    return _in_process_job(home, trials, capacity)


def _through_cli(root: Path, mode: str, trials: int, capacity: int, profile: Path) -> tuple[float, float]:
    """Marginal wall and CPU seconds per trial of N distinct tasks through the CLI."""
    env = {"ENVLOOP_SANDBOX": mode}
    runs = {}
    for n in (1, trials):
        home = root / f"cli-{mode}-{n}"
        runs[n] = cli_runs.job_through_cli(
            home, root / f"tasks-{n}", profile, capacity=capacity, env_extra=env
        )
    small, big = runs[1].run, runs[trials].run
    return (big.wall - small.wall) / (trials - 1), (big.cpu - small.cpu) / (trials - 1)


def _directory_latency_us(parent: Path, count: int = 300) -> float:
    """Creating and removing one directory where the instances live: what every trial does a few
    times, and on a virtual disk the figure that moves these results most from run to run."""
    probe = parent / "latency-probe"
    probe.mkdir()
    start = time.perf_counter()
    for number in range(count):
        (probe / str(number)).mkdir()
    for number in range(count):
        (probe / str(number)).rmdir()
    elapsed = time.perf_counter() - start
    probe.rmdir()
    return elapsed / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--capacity", type=int, default=4)
    parser.add_argument("--dir", type=Path, default=None, help="parent of the run's homes")
    args = parser.parse_args()
    if args.trials < 2:
        parser.error("--trials must be at least 2 (the marginal cost subtracts a one-task run)")
    cli_runs.become_subreaper()
    root = Path(tempfile.mkdtemp(prefix="envloop-bench-", dir=args.dir))
    try:
        for n in (1, args.trials):
            cli_runs.trivial_tasks(root / f"tasks-{n}", n)
        profile = cli_runs.profile_file(root / "true.json", cli_runs.TRUE_AGENT)
        modes = ["plain"] + (["bwrap"] if bwrap_executable()[0] else [])
        n, capacity = args.trials, args.capacity
        print(f"{n} trivial trials, capacity {capacity}, {os.cpu_count()} cores")
        print(f"load average at the start: {os.getloadavg()[0]:.2f} (other processes share the cores)")
        latency = _directory_latency_us(root)
        print(f"instances under {root}: creating and removing a directory takes {latency:.0f} µs there")
        print("ms per trial: wall / cpu")
        print(
            f"{'mode':<7}{'CLI, distinct tasks':>21}{'in-process, 1 task':>20}{'floor':>15}"
            f"{'CLI × floor':>13}{'in-proc × floor':>17}"
        )
        for mode in modes:
            cli_wall, cli_cpu = _through_cli(root, mode, n, capacity, profile)
            old_wall, old_cpu = (x / n for x in _in_process(root, mode, n, capacity, profile))
            f_wall, f_cpu = (x / n for x in floors.run_floor(n, capacity, mode, root / f"floor-{mode}"))
            print(
                f"{mode:<7}{cli_wall * 1000:>12.2f} /{cli_cpu * 1000:>6.2f}"
                f"{old_wall * 1000:>12.2f} /{old_cpu * 1000:>6.2f}"
                f"{f_wall * 1000:>7.2f} /{f_cpu * 1000:>6.2f}"
                f"{cli_wall / f_wall:>13.2f}{old_wall / f_wall:>17.2f}"
            )
            sys.stdout.flush()
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"peak memory: in-process worker {own:.0f} MiB, largest child (CLI worker, el) {kids:.0f} MiB")
        os.environ.pop("ENVLOOP_SANDBOX")
        runs = []
        for number in range(3):
            home = root / f"one-trial-{number}"
            runs.append(cli_runs.job_through_cli(home, root / "tasks-1", profile, capacity=None).run.wall)
        print(
            f"one-trial job end to end (el job submit --wait and the worker it starts, cold): "
            f"best {min(runs):.2f} s, median {sorted(runs)[1]:.2f} s"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
