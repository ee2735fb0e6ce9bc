"""Fault injection, longer than CI's: SIGKILL workers and the server at random moments while a job
runs, then check every trial ended once with its task's reward and the job's metrics are exact.

    .venv/bin/python bench/faults.py [--kills 100] [--tasks 60] [--attempts 3] [--seed 1] [--dir DIR]

Runs on SQLite under a fresh home; with ENVLOOP_DATABASE_URL set, on that store instead.
"""

import argparse
import shutil
import tempfile
from pathlib import Path

from envloop.testing.chaos import run_chaos


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=None, help="parent of the run's home")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="envloop-faults-", dir=args.dir))
    try:
        report = run_chaos(
            root / "home",
            kills=args.kills,
            tasks=args.tasks,
            attempts=args.attempts,
            workers=args.workers,
            seed=args.seed,
            timeout=max(600.0, args.kills * 5.0),
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"{report.kills} SIGKILLs ({report.server_kills} of the server, {report.worker_kills} of "
        f"workers) during one job of {report.trials} trials, seed {args.seed}: "
        f"{report.reruns} trial runs repeated after a kill, {report.seconds:.0f} s"
    )
    if report.problems:
        print("NOT HELD:")
        for problem in report.problems:
            print(f"  {problem}")
        raise SystemExit(1)
    print("held: every trial completed once with its task's reward; score and coverage exact")


if __name__ == "__main__":
    main()
