"""`el` as the first process of its PID namespace (a container started without an init): every
orphan there is its to collect, and bwrap leaves one per sandboxed command."""

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from envloop.services import jobs
from envloop.services.context import Context
from envloop.store.tables import Trial
from tests.conftest import submit_command_job, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("unshare") is None,
        reason="a PID namespace of its own needs root and unshare(1)",
    ),
]


def _first_in_a_pid_namespace(*args: str) -> subprocess.Popen[bytes]:
    """`python -m envloop ARGS` as PID 1 of a new PID namespace, as in a container without an init."""
    command = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "envloop", *args]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _first_of(unshare: subprocess.Popen[bytes]) -> int:
    """The host pid of the new namespace's first process (unshare's child)."""
    children = Path(f"/proc/{unshare.pid}/task/{unshare.pid}/children")
    wait_for(lambda: children.read_text().split() != [], timeout=10)
    return int(children.read_text().split()[0])


def _zombie_children(parent: int) -> int:
    """Ended processes `parent` has not collected (an ended process's own namespace links are gone,
    so it is found by its parent)."""
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        count += fields[0] == "Z" and int(fields[1]) == parent
    return count


def test_a_worker_first_in_its_pid_namespace_leaves_no_ended_process_behind(
    ctx: Context, home: Path, tmp_path: Path
) -> None:
    """Before, the worker held two zombies per sandboxed trial for good (84 after 40 trials), until
    the container's pid limit would refuse every command. Now its init collects them, passes a
    stop on to it, and exits as it did."""
    job_id = submit_command_job(ctx, tmp_path, "true", tasks=6)
    unshare = _first_in_a_pid_namespace("worker", "--processes", "1")
    try:
        first = _first_of(unshare)
        wait_for(lambda: jobs.get_job(ctx, job_id).status == "completed", timeout=120)
        with ctx.store.read() as session:
            trials = list(session.scalars(select(Trial).where(Trial.job_id == job_id)))
        assert {(t.status, t.sandbox) for t in trials} == {("completed", "bwrap")}
        wait_for(lambda: _zombie_children(first) == 0, timeout=10)

        os.kill(first, signal.SIGTERM)  # as `docker stop` does: to the first process alone
        assert unshare.wait(timeout=60) == 0
    finally:
        if unshare.poll() is None:
            unshare.kill()
            unshare.wait()


@pytest.mark.parametrize("args", [["job", "get", "job_missing"], ["--version"]])
def test_a_command_first_in_its_pid_namespace_exits_as_elsewhere(home: Path, args: list[str]) -> None:
    elsewhere = subprocess.run(
        [sys.executable, "-m", "envloop", *args], capture_output=True, check=False, timeout=60
    )
    first = _first_in_a_pid_namespace(*args)
    assert first.wait(timeout=60) == elsewhere.returncode
