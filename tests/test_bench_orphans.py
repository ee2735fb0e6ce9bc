"""The benchmarks, subreapers of what they start, collect the orphans their runs leave (bwrap leaves
one per sandboxed command): thousands of uncollected zombies slowed every later run."""

import subprocess
import sys

from tests.conftest import REPO

SCRIPT = """
import os, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
import cli_runs

cli_runs.become_subreaper()
for _ in range(5):  # each shell leaves its background child behind, to be re-parented here
    subprocess.run(["sh", "-c", "sleep 0.1 & exit 0"], check=True)
time.sleep(0.5)
reaped = cli_runs.reap_orphans()
try:
    os.waitpid(-1, os.WNOHANG)
    left = "children left"
except ChildProcessError:  # none at all, ended or not
    left = "none left"
print(reaped, left, cli_runs.reap_orphans())
"""


def test_the_orphans_a_run_leaves_to_the_bench_are_collected() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(REPO / "bench")], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["5", "none", "left", "0"], done.stdout + done.stderr
