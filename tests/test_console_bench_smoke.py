"""bench/console.py runs end to end on a small job and prints every figure it promises."""

import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_console_benchmark_prints_server_and_browser_figures() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "console.py"),
            "--tasks",
            "20",
            "--steps",
            "120",
            "--repeat",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    for label in (
        "job page (Metrics)",
        "task grid (first 100 tasks)",
        "trace viewer",
        "End key to the last step",
    ):
        assert label in proc.stdout
    assert "time until usable in chromium" in proc.stdout
