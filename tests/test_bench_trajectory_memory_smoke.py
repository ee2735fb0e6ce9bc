"""bench/trajectory_memory.py runs end to end on a small trajectory and prints every figure it promises."""

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def test_the_trajectory_memory_benchmark_prints_the_servers_growth_for_every_operation() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "trajectory_memory.py"), "--huge-mb", "4", "--trials", "2"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env={k: v for k, v in os.environ.items() if k != "ENVLOOP_DATABASE_URL"},
    )
    assert proc.returncode == 0, proc.stderr
    for label in (
        "server RSS at rest",
        "step pages, first to last",
        "whole trajectory streamed (/steps)",
        "ATIF export streamed (/steps?format=atif)",
        "the three at once",
        "console trace viewer of 2 trials",
    ):
        assert proc.stdout.count(label) >= 1, label
    assert proc.stdout.count("peak RSS growth") == 10
