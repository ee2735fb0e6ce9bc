"""Scheduler scale: one job with many pending trials, submitted as users submit it.

For each size, on a fresh `ENVLOOP_HOME` (SQLite): `el job submit` of TASKS distinct trivial tasks
x SIZE/TASKS attempts, with the background worker it starts. Printed per size: the submitting
process's wall, CPU and peak memory; the time from the start of `el job submit` to the first trial
started and to the first trial finished; the worker's trials per second and CPU per trial (its
own and its sandboxes') over its first RUN trials, and its resident memory after them (current and
peak). A scheduler that scales shows the same
worker figures for 1,000 and for 100,000 pending trials.

    .venv/bin/python bench/pending.py [--sizes 1000,100000] [--tasks 100] [--run 1000]
                                      [--capacity 4] [--mode plain] [--rounds 1]

Sizes alternate within each round (small, large, small, large, ...) so a change of load on a shared
machine hits both alike.

The smallest run that prints every figure (the smoke test's): `--sizes 2,4 --tasks 2 --run 2
--rounds 2`.
"""

import argparse
import json
import os
import shutil
import signal
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import cli_runs

_POLL_SEC = 0.02


@dataclass
class Figures:
    submit_wall: float
    submit_cpu: float
    submit_mib: float
    first_started: float
    first_finished: float
    trials_per_sec: float
    worker_cpu_ms: float
    worker_rss_mib: float
    worker_peak_mib: float


def _memory_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a live process, in MiB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def _cpu_sec(pid: int) -> float:
    """CPU seconds of a live process and of the children it has waited for (its sandboxes)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _count(db: sqlite3.Connection, job_id: str, statuses: tuple[str, ...]) -> int:
    marks = ",".join("?" * len(statuses))
    sql = f"SELECT count(*) FROM trials WHERE job_id = ? AND status IN ({marks})"
    return int(db.execute(sql, (job_id, *statuses)).fetchone()[0])


def _wait_for(predicate: Callable[[], bool], limit_sec: float, what: str) -> float:
    start = time.perf_counter()
    while not predicate():
        if time.perf_counter() - start > limit_sec:
            raise RuntimeError(f"gave up waiting for {what} after {limit_sec:.0f} s")
        time.sleep(_POLL_SEC)
    return time.perf_counter()


def measure(root: Path, source: Path, profile: Path, size: int, args: argparse.Namespace) -> Figures:
    home = root / f"home-{size}-{time.monotonic_ns()}"
    home.mkdir(parents=True)
    logs = home / "bench-logs"
    logs.mkdir()
    env = dict(os.environ, ENVLOOP_HOME=str(home), ENVLOOP_SANDBOX=args.mode)
    cli_runs.measured(
        [*cli_runs.EL, "dataset", "push", str(source), "--name", "bench", "--json"],
        env,
        logs / "push.out",
        logs / "push.err",
    )
    cli_runs.measured(
        [*cli_runs.EL, "profile", "create", "bench/agent", "1", "--file", str(profile), "--json"],
        env,
        logs / "profile.out",
        logs / "profile.err",
    )
    attempts = size // args.tasks
    submit = [*cli_runs.EL, "job", "submit", "--dataset", "bench@1", "--profile", "bench/agent@1"]
    submit += ["--attempts", str(attempts), "--capacity", str(args.capacity), "--json"]
    start = time.perf_counter()
    submitted = cli_runs.measured(submit, env, logs / "submit.out", logs / "submit.err")
    job_id = json.loads((logs / "submit.out").read_text())["id"]
    lock = home / "background-worker.lock"
    _wait_for(lambda: lock.read_text().strip().isdigit(), 60, "the background worker to start")
    worker_pid = int(lock.read_text().strip())
    db = sqlite3.connect(f"file:{home / 'envloop.db'}?mode=ro", uri=True, timeout=30)
    try:
        done = ("completed", "failed", "cancelled")
        first_started = _wait_for(
            lambda: _count(db, job_id, ("running", *done)) > 0, 120, "the first trial to start"
        )
        first_finished = _wait_for(lambda: _count(db, job_id, done) > 0, 120, "the first trial to finish")
        cpu_at_first = _cpu_sec(worker_pid)
        run = min(args.run, attempts * args.tasks)
        finished_run = _wait_for(lambda: _count(db, job_id, done) >= run, 1800, f"{run} trials")
        rss, peak = _memory_mib(worker_pid)
        cpu_over_run = _cpu_sec(worker_pid) - cpu_at_first
    finally:
        db.close()
    cli_runs.measured(
        [*cli_runs.EL, "job", "cancel", job_id, "--wait-sec", "0"],
        env,
        logs / "cancel.out",
        logs / "cancel.err",
    )
    os.kill(worker_pid, signal.SIGTERM)
    cli_runs.reap(worker_pid)
    shutil.rmtree(home, ignore_errors=True)
    return Figures(
        submit_wall=submitted.wall,
        submit_cpu=submitted.cpu,
        submit_mib=submitted.rss_mib,
        first_started=first_started - start,
        first_finished=first_finished - start,
        trials_per_sec=(run - 1) / max(finished_run - first_finished, 1e-9),
        worker_cpu_ms=1000 * cpu_over_run / max(run - 1, 1),
        worker_rss_mib=rss,
        worker_peak_mib=peak,
    )


def _row(size: int, figures: Figures) -> str:
    return (
        f"{size:>7} pending | submit {figures.submit_wall:6.2f} s wall {figures.submit_cpu:6.2f} s CPU "
        f"{figures.submit_mib:6.0f} MiB | first trial started {figures.first_started:5.2f} s, "
        f"finished {figures.first_finished:5.2f} s | worker {figures.trials_per_sec:6.1f} trials/s, "
        f"{figures.worker_cpu_ms:5.2f} ms CPU per trial, "
        f"RSS {figures.worker_rss_mib:5.0f} MiB (peak {figures.worker_peak_mib:5.0f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000", help="Pending trials per job, comma-separated.")
    parser.add_argument("--tasks", type=int, default=100, help="Distinct tasks (attempts = size / tasks).")
    parser.add_argument("--run", type=int, default=1000, help="Trials the worker runs before it is measured.")
    parser.add_argument("--capacity", type=int, default=4)
    parser.add_argument("--mode", choices=("plain", "bwrap"), default="plain")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=None, help="Work here (kept) instead of a temp dir.")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    if any(size < args.tasks or size % args.tasks for size in sizes):
        parser.error("each size must be a multiple of --tasks")
    root = args.dir or Path(tempfile.mkdtemp(prefix="envloop-pending-"))
    cli_runs.become_subreaper()
    source = cli_runs.trivial_tasks(root / "tasks", args.tasks)
    profile = cli_runs.profile_file(root / "profile.json", cli_runs.TRUE_AGENT)
    results: dict[int, list[Figures]] = {size: [] for size in sizes}
    try:
        for number in range(1, args.rounds + 1):
            for size in sizes if number % 2 else reversed(sizes):
                figures = measure(root, source, profile, size, args)
                results[size].append(figures)
                print(f"round {number}: {_row(size, figures)}", flush=True)
        if args.rounds > 1:
            for size, runs in results.items():
                fields = Figures.__dataclass_fields__
                median = Figures(
                    **{name: statistics.median(getattr(run, name) for run in runs) for name in fields}
                )
                print(f"median of {args.rounds} rounds: {_row(size, median)}")
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"{args.mode} sandbox, capacity {args.capacity}; load average after the run: {load}")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
