"""Crash safety under fault injection, in CI: at least 20 SIGKILLs of workers and of the server at
random (seeded) moments while a job runs, on SQLite and on PostgreSQL. Every trial ends once, with
its task's reward, and the job's metrics are exact. `bench/faults.py` runs the longer version."""

from pathlib import Path

import pytest

from envloop.testing.chaos import run_chaos
from tests.pg import BACKENDS

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("store_url", BACKENDS, indirect=True)]


def test_twenty_kills_of_workers_and_server_lose_nothing_and_count_nothing_twice(
    store_url: str, home: Path
) -> None:
    report = run_chaos(home, kills=20, tasks=30, attempts=2, workers=3, seed=7, timeout=240)
    assert report.problems == []
    assert report.kills == 20 and report.server_kills > 0 and report.worker_kills > 0
    assert report.trials == 60
