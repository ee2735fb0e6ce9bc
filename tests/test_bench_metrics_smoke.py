"""The metrics benchmark runs end to end (tiny sizes here; the real figures come from running it)."""

import subprocess
import sys

from tests.conftest import REPO


def test_the_metrics_benchmark_prints_every_figure() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "metrics.py"),
            "--tasks",
            "30",
            "--attempts",
            "4",
            "--rows",
            "40",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    for label in ("full metrics", "paired comparison", "planning", "show: read", "add one finished job"):
        assert label in proc.stdout
    assert "the new row ranks" in proc.stdout
