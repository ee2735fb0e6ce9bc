"""`el job submit` starts its background worker before it loads the store, so the two start-ups
overlap; a refused submission stops the worker it started, and processes that open a new store at
once all find it migrated exactly once."""

import os
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import select

from envloop.scheduling.background import is_running
from envloop.services.context import open_context
from envloop.store.db import HEAD_REVISION
from envloop.store.tables import Worker
from tests.conftest import EXAMPLES, El, write_profile

OPEN_STORE = """
from envloop.services.context import open_context
open_context().close()
"""


def _no_worker_left(home: Path) -> bool:
    """True once no background worker holds the home's lock (a stopping one gets a few seconds)."""
    deadline = time.monotonic() + 15
    while is_running(home):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_refused_submission_leaves_no_worker_running(el: El, home: Path, tmp_path: Path) -> None:
    el.ok("dataset", "push", str(EXAMPLES / "tasks"), "--name", "demo")
    refused = [
        ("--dataset", "missing@1", "--profile", "nop@1"),  # unknown dataset: refused by the store
        ("--dataset", "demo@1", "--profile", "nop@1", "--tag", "no-equals-sign"),  # refused before it
        ("--dataset", "demo@1"),  # no profile
    ]
    for args in refused:
        result = el("job", "submit", *args)
        assert result.code == 2, result.stderr
        assert "Traceback" not in result.stderr
        assert _no_worker_left(home), args
    ctx = open_context(home)
    try:
        with ctx.store.read() as session:
            assert session.scalars(select(Worker)).all() == []
    finally:
        ctx.close()


def test_a_submitted_job_runs_on_the_worker_started_before_it(el: El, home: Path, tmp_path: Path) -> None:
    el.ok("dataset", "push", str(EXAMPLES / "tasks"), "--name", "demo")
    el.ok(
        "profile",
        "create",
        "oracle",
        "1",
        "--file",
        str(write_profile(tmp_path / "o.json", {"AGENT_NAME": "oracle"})),
    )
    done = el(
        "job",
        "submit",
        "--dataset",
        "demo@1",
        "--profile",
        "oracle@1",
        "--task",
        "hello-file",
        "--wait",
        "--json",
    )
    assert done.code == 0, done.stderr
    assert done.json()["counts"]["completed"] == 1
    assert is_running(home)  # the worker stays for the next job until it has been idle a while


def test_processes_opening_a_new_store_at_once_all_find_it_migrated(tmp_path: Path) -> None:
    for round_number in range(3):
        home = tmp_path / f"home-{round_number}"
        inherited = {k: v for k, v in os.environ.items() if k != "ENVLOOP_DATABASE_URL"}
        env = {**inherited, "ENVLOOP_HOME": str(home)}  # SQLite under the new home
        opening = [
            subprocess.Popen([sys.executable, "-c", OPEN_STORE], env=env, stderr=subprocess.PIPE, text=True)
            for _ in range(4)
        ]
        for process in opening:
            _, err = process.communicate(timeout=120)
            assert process.returncode == 0, err[-2000:]
        ctx = open_context(home)
        try:
            with ctx.store.engine.connect() as conn:
                assert (
                    conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == HEAD_REVISION
                )
        finally:
            ctx.close()
