"""bench/samples.py runs end to end on a small job and prints every figure it promises."""

import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def test_the_samples_benchmark_prints_its_figures_and_the_target() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "samples.py"),
            "--rows",
            "20",
            "--attempts",
            "2",
            "--repeat",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    for label in ("first read", "console Samples page", "console, searched", "API, 500 samples", "target:"):
        assert label in proc.stdout
