"""Throughput of trivial trials as users run them, in both sandbox modes, against the bare cost of
the same processes; with the old in-process figure beside it.

Each trial: the `command` agent runs `true`, the verifier writes 1.

- CLI, distinct tasks (the realistic shape, and the default): N distinct tasks x 1 attempt, through
  the CLI on a fresh `ENVLOOP_HOME` (`el dataset push`, `el profile create`, `el job submit --wait`;
  a background worker at `--capacity` is started first, its start counted). Marginal per trial:
  (run of N - run of 1 task) / (N - 1); CPU includes the `el` follower, the worker and its sandboxes.
- in-process, one task (the old figure): one task x N attempts on an in-process worker against the
  same kind of store, after a warm-up job (20 trials): no command start, no follower, one task archive.
- floor: the same two processes per trial (agent, verifier) spawned directly, and inside bwrap, at
  the same concurrency.

The three are measured in rounds, interleaved (floor, in-process, CLI, then the next mode, the
order rotating each round), so a change of load on a shared machine moves all three alike; each
round's ratios are printed, then their medians. Last, a one-trial job end to end (`el job submit
--wait` with the worker it starts, cold), three times.

    .venv/bin/python bench/trials.py [--trials 1000] [--capacity 4] [--rounds 3] [--warm-up 20]
                                     [--one-trial-runs 3] [--dir DIR]

The smallest run that prints every figure (the smoke test's): `--trials 2 --capacity 2 --rounds 2
--warm-up 1 --one-trial-runs 1`.
"""

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import cli_runs
import floors

from envloop.environments.local.bwrap import bwrap_executable
from envloop.scheduling.worker import Worker, WorkerConfig
from envloop.services import datasets, job_submission, jobs, profiles
from envloop.services.context import open_context


def _in_process_job(home: Path, trials: int, capacity: int) -> tuple[float, float]:
    ctx = open_context(home)
    request = job_submission.JobRequest(dataset="bench@1", profiles=["bench/agent@1"], attempts=trials)
    job_id = job_submission.submit_job(ctx, request).job.id
    worker = Worker(ctx, WorkerConfig(capacity=capacity, idle_poll=0.01))
    start_wall, start_cpu = time.perf_counter(), floors.cpu_seconds()
    asyncio.run(worker.run(until=lambda: worker.completed >= trials))
    wall, cpu = time.perf_counter() - start_wall, floors.cpu_seconds() - start_cpu
    view = jobs.get_job(ctx, job_id)
    assert view.counts["completed"] == trials, view.counts
    ctx.close()
    return wall, cpu


def _in_process(
    root: Path, tasks_root: Path, mode: str, trials: int, capacity: int, profile: Path, warm_up: int
) -> tuple[float, float]:
    """The old figure: one task, many attempts, a warm in-process worker."""
    home = root / f"in-process-{mode}"
    os.environ["ENVLOOP_HOME"], os.environ["ENVLOOP_SANDBOX"] = str(home), mode
    ctx = open_context(home)
    datasets.push_dataset(ctx, tasks_root / "tasks-1", "bench")
    profiles.create_profile(ctx, "bench/agent", "1", profiles.read_profile_file(profile))
    ctx.close()
    _in_process_job(home, warm_up, capacity)  # warm-up: imports, first launch, caches
    return _in_process_job(home, trials, capacity)


def _through_cli(
    root: Path, tasks_root: Path, mode: str, trials: int, capacity: int, profile: Path
) -> tuple[float, float]:
    """Marginal wall and CPU seconds per trial of N distinct tasks through the CLI."""
    env = {"ENVLOOP_SANDBOX": mode}
    runs = {}
    for n in (1, trials):
        home = root / f"cli-{mode}-{n}"
        runs[n] = cli_runs.job_through_cli(
            home, tasks_root / f"tasks-{n}", profile, capacity=capacity, env_extra=env
        )
    small, big = runs[1].run, runs[trials].run
    return (big.wall - small.wall) / (trials - 1), (big.cpu - small.cpu) / (trials - 1)


@dataclass
class _Row:
    """One round of one mode, ms per trial."""

    cli: tuple[float, float]
    in_process: tuple[float, float]
    floor: tuple[float, float]

    @property
    def ratios(self) -> tuple[float, float]:
        return self.cli[0] / self.floor[0], self.in_process[0] / self.floor[0]

    def __str__(self) -> str:
        (cw, cc), (iw, ic), (fw, fc) = self.cli, self.in_process, self.floor
        cli_ratio, in_process_ratio = self.ratios
        return (
            f"{cw:>12.2f} /{cc:>6.2f}{iw:>12.2f} /{ic:>6.2f}{fw:>7.2f} /{fc:>6.2f}"
            f"{cli_ratio:>13.2f}{in_process_ratio:>17.2f}"
        )


def _round(root: Path, mode: str, n: int, capacity: int, profile: Path, *, rotate: int, warm_up: int) -> _Row:
    """Floor, in-process and CLI figures of one mode, measured one after the other in an order that
    rotates with `rotate`, each in fresh directories under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    tasks_root = root.parent

    def floor() -> tuple[float, float]:
        wall, cpu = floors.run_floor(n, capacity, mode, root / f"floor-{mode}")
        return wall / n * 1000, cpu / n * 1000

    def in_process() -> tuple[float, float]:
        wall, cpu = _in_process(root, tasks_root, mode, n, capacity, profile, warm_up)
        return wall / n * 1000, cpu / n * 1000

    def cli() -> tuple[float, float]:
        wall, cpu = _through_cli(root, tasks_root, mode, n, capacity, profile)
        return wall * 1000, cpu * 1000

    steps = [floor, in_process, cli]
    order = steps[rotate % 3 :] + steps[: rotate % 3]
    results = {}
    for step in order:
        results[step.__name__] = step()
        cli_runs.reap_orphans()  # the sandboxes of the floor and the in-process worker leave theirs here
    return _Row(cli=results["cli"], in_process=results["in_process"], floor=results["floor"])


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
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of each figure")
    parser.add_argument(
        "--warm-up", type=int, default=20, help="trials of the in-process worker's warm-up job"
    )
    parser.add_argument(
        "--one-trial-runs", type=int, default=3, help="one-trial jobs end to end, timed at the end"
    )
    parser.add_argument("--dir", type=Path, default=None, help="parent of the run's homes")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.trials < 2:
        parser.error("--trials must be at least 2 (the marginal cost subtracts a one-task run)")
    if args.warm_up < 1 or args.one_trial_runs < 1:
        parser.error("--warm-up and --one-trial-runs must be at least 1")
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
            f"{'round':<6}{'mode':<7}{'CLI, distinct tasks':>21}{'in-process, 1 task':>20}{'floor':>15}"
            f"{'CLI × floor':>13}{'in-proc × floor':>17}"
        )
        ratios: dict[str, list[tuple[float, float]]] = {mode: [] for mode in modes}
        for number in range(args.rounds):
            for mode in modes[number % len(modes) :] + modes[: number % len(modes)]:
                row = _round(
                    root / f"round-{number}", mode, n, capacity, profile, rotate=number, warm_up=args.warm_up
                )
                ratios[mode].append(row.ratios)
                print(f"{number + 1:<6}{mode:<7}{row}")
                sys.stdout.flush()
        for mode, pairs in ratios.items():
            cli_ratio = statistics.median(pair[0] for pair in pairs)
            in_process_ratio = statistics.median(pair[1] for pair in pairs)
            print(
                f"median of {len(pairs)} rounds, {mode}: CLI {cli_ratio:.2f}× its floor, "
                f"in-process {in_process_ratio:.2f}×"
            )
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"peak memory: in-process worker {own:.0f} MiB, largest child (CLI worker, el) {kids:.0f} MiB")
        os.environ.pop("ENVLOOP_SANDBOX")
        runs = []
        for number in range(args.one_trial_runs):
            home = root / f"one-trial-{number}"
            runs.append(cli_runs.job_through_cli(home, root / "tasks-1", profile, capacity=None).run.wall)
        print(
            f"one-trial job end to end (el job submit --wait and the worker it starts, cold): "
            f"best {min(runs):.2f} s, median {statistics.median(runs):.2f} s of {len(runs)}"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
