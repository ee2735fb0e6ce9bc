"""Throughput of trivial trials, in both sandbox modes, against the bare cost of the same processes.

Each trial: the `command` agent runs `true`, the verifier writes 1. The job runs on an in-process
worker against a real SQLite store. Marginal figures exclude start-up: a warm-up job runs first.
The floor spawns the same two processes per trial (agent, verifier) directly, and inside bwrap,
with the same concurrency. Last, a one-trial job end to end, command start included.

    .venv/bin/python bench/trials.py [--trials 1000] [--capacity 4] [--dir DIR]
"""

import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from envloop.environments.bwrap import bwrap_executable
from envloop.scheduling import background
from envloop.scheduling.worker import Worker, WorkerConfig
from envloop.services import datasets, jobs, profiles
from envloop.services.context import open_context

VERIFIER = 'echo 1 > "${ENVLOOP_LOGS_DIR:-/logs}/verifier/reward.txt"\n'


def _task(root: Path) -> Path:
    task = root / "trivial"
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text('version = "1.0"\n')
    (task / "instruction.md").write_text("Nothing to do.\n")
    (task / "tests" / "test.sh").write_text("#!/usr/bin/env bash\n" + VERIFIER)
    return task


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _run_job(home: Path, trials: int, capacity: int) -> tuple[float, float]:
    ctx = open_context(home)
    request = jobs.JobRequest(dataset="bench@1", profiles=["true@1"], attempts=trials)
    job_id = jobs.submit_job(ctx, request).job.id
    worker = Worker(ctx, WorkerConfig(capacity=capacity, idle_poll=0.01))
    start_wall, start_cpu = time.perf_counter(), _cpu()
    asyncio.run(worker.run(until=lambda: worker.completed >= trials))
    wall, cpu = time.perf_counter() - start_wall, _cpu() - start_cpu
    view = jobs.get_job(ctx, job_id)
    assert view.counts["completed"] == trials, view.counts
    ctx.close()
    return wall, cpu


async def _floor(trials: int, capacity: int, prefix: list[str], workdir: Path) -> tuple[float, float]:
    """The same processes a trial starts (agent `true`, verifier script), spawned directly."""
    script = workdir / "test.sh"
    script.write_text(VERIFIER)
    (workdir / "verifier").mkdir(exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "ENVLOOP_LOGS_DIR": str(workdir)}
    gate = asyncio.Semaphore(capacity)

    async def one() -> None:
        async with gate:
            for argv in (["bash", "-c", "true"], ["bash", str(script)]):
                proc = await asyncio.create_subprocess_exec(*prefix, *argv, env=env)
                await proc.wait()

    start_wall, start_cpu = time.perf_counter(), _cpu()
    await asyncio.gather(*(one() for _ in range(trials)))
    return time.perf_counter() - start_wall, _cpu() - start_cpu


def _bwrap_prefix(workdir: Path) -> list[str]:
    binds = [
        arg
        for d in ("/usr", "/bin", "/lib", "/lib64", "/etc")
        if Path(d).exists()
        for arg in ("--ro-bind", d, d)
    ]
    return [
        "bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        *binds,
        "--bind",
        str(workdir),
        str(workdir),
        "--",
    ]


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


def _one_trial_end_to_end(home: Path) -> float:
    env = dict(os.environ, ENVLOOP_HOME=str(home))
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "envloop",
            "job",
            "submit",
            "--dataset",
            "bench@1",
            "--profile",
            "true@1",
            "--attempts",
            "1",
            "--wait",
            "--json",
        ],
        env=env,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def _stop_background_worker(home: Path) -> None:
    """The submissions started one; it would otherwise poll for 30 s and skew the next run."""
    ctx = open_context(home)
    pid = background.holder_pid(ctx)
    ctx.close()
    if pid is not None:
        os.kill(pid, signal.SIGTERM)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--capacity", type=int, default=4)
    parser.add_argument("--dir", type=Path, default=None, help="parent of the run's home")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="envloop-bench-", dir=args.dir))
    try:
        home = root / "home"
        os.environ["ENVLOOP_HOME"] = str(home)
        ctx = open_context(home)
        datasets.push_dataset(ctx, _task(root / "src"), "bench")
        profile = root / "true.json"
        profile.write_text(
            json.dumps(
                {
                    "schema_version": "envplatform.profile/v2",
                    "spec": {"params": {"AGENT_NAME": "command", "AGENT_COMMAND": "true"}},
                }
            )
        )
        profiles.create_profile(ctx, "true", "1", profiles.read_profile_file(profile))
        ctx.close()
        modes = ["plain"] + (["bwrap"] if bwrap_executable()[0] else [])
        print(f"{args.trials} trivial trials, capacity {args.capacity}, {os.cpu_count()} cores")
        print(
            f"instances under {home}: creating and removing a directory takes "
            f"{_directory_latency_us(home):.0f} µs there"
        )
        print(
            f"{'mode':<8}{'trials/s':>10}{'wall ms/trial':>15}{'cpu ms/trial':>14}{'floor wall':>12}"
            f"{'floor cpu':>11}{'× floor':>9}"
        )
        for mode in modes:
            os.environ["ENVLOOP_SANDBOX"] = mode
            _run_job(home, 20, args.capacity)  # warm-up: imports, first launch, caches
            wall, cpu = _run_job(home, args.trials, args.capacity)
            floor_dir = root / f"floor-{mode}"
            floor_dir.mkdir()
            prefix = _bwrap_prefix(floor_dir) if mode == "bwrap" else []
            f_wall, f_cpu = asyncio.run(_floor(args.trials, args.capacity, prefix, floor_dir))
            n = args.trials
            print(
                f"{mode:<8}{n / wall:>10.1f}{wall / n * 1000:>15.2f}{cpu / n * 1000:>14.2f}"
                f"{f_wall / n * 1000:>12.2f}{f_cpu / n * 1000:>11.2f}{wall / f_wall:>9.2f}"
            )
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"peak memory: worker process {own:.0f} MiB, largest child {kids:.0f} MiB")
        os.environ.pop("ENVLOOP_SANDBOX")
        runs = [_one_trial_end_to_end(home) for _ in range(3)]
        _stop_background_worker(home)
        print(
            f"one-trial job end to end (el job submit --wait, command start included): "
            f"best {min(runs):.2f} s, median {sorted(runs)[1]:.2f} s"
        )
    finally:
        subprocess.run([sys.executable, "-c", "pass"], check=False)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
