"""What following a job costs: the CPU of `el job submit --wait` (the follower) next to the worker's,
for N distinct trivial tasks x 1 attempt through the CLI on a fresh `ENVLOOP_HOME`.

The follower's CPU includes its start-up, the submission and the one result it prints at the end;
what this script watches is that the rest (following) stays small and does not grow with the job.

    .venv/bin/python bench/follow.py [--trials 1000] [--capacity 4] [--mode plain] [--dir DIR]

Compare two versions by running it with each on PYTHONPATH (the `el` processes inherit it).
"""

import argparse
import os
import shutil
import tempfile
from pathlib import Path

import cli_runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--capacity", type=int, default=4)
    parser.add_argument("--mode", choices=("plain", "bwrap"), default="plain")
    parser.add_argument("--dir", type=Path, default=None, help="Work here (kept) instead of a temp dir.")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="envloop-follow-"))
    cli_runs.become_subreaper()
    profile = cli_runs.profile_file(root / "profile.json", cli_runs.TRUE_AGENT)
    try:
        for n in (1, args.trials):
            source = cli_runs.trivial_tasks(root / f"tasks-{n}", n)
            run = cli_runs.job_through_cli(
                root / f"home-{n}",
                source,
                profile,
                capacity=args.capacity,
                env_extra={"ENVLOOP_SANDBOX": args.mode},
            )
            total = run.follower.cpu + run.worker.cpu
            print(
                f"{n:>5} trials ({args.mode}, capacity {args.capacity}): wall {run.run.wall:6.2f} s; "
                f"follower CPU {run.follower.cpu:6.2f} s ({100 * run.follower.cpu / total:4.1f}% of "
                f"the job's {total:6.2f} s), worker CPU {run.worker.cpu:6.2f} s; "
                f"follower peak {run.follower.rss_mib:.0f} MiB",
                flush=True,
            )
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"load average after the run: {load} (2 cores)")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
