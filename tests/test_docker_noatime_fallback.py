"""Where access times are not kept, a shared verifier is flagged by kind of path instead.

access_record.py learns what a shared verifier opened from access times, which a `noatime` mount
never updates. Here the running trial's container root is remounted `noatime` from the host, in the
daemon's mount namespace (where the worker reads the container's files) and in the container's own
(where the verifier's reads land), between the agent's plant and the verifier, as an operator's
mount options would have it from the start: the verifier's imports then move no access time at all.
The trial must not pass as clean: every change of a kind a verifier may run is flagged, used or
not (the binary never run is named too, which a kept record would leave out), and a change of no
such kind is not.
"""

import json
import subprocess
import threading
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.environments.docker.orphans import TRIAL_LABEL
from tests.docker_daemon import docker_daemon
from tests.test_docker_verifier_reads import PYC_PLANT, PYTHON_VERIFIER, named, run_trial, tampered

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon"]

REMOUNTED = "/run/remounted-noatime"
WAIT_FOR_REMOUNT = (
    f"for i in $(seq 1 600); do [ -e {REMOUNTED} ] && break; sleep 0.1; done; [ -e {REMOUNTED} ] || exit 3\n"
)


def _docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True, timeout=60).stdout


def _remount_noatime(trial_id: str, done: threading.Event, failures: list[str]) -> None:
    """Each container of the trial, once it runs: its root `noatime` on both sides, then the agent
    is told (a trial starts helper containers too, and its own may come after them)."""
    remounted: set[str] = set()
    while not done.wait(0.2):
        listed = _docker("ps", "-q", "--no-trunc", "--filter", f"label={TRIAL_LABEL}={trial_id}").split()
        for container in set(listed) - remounted:
            remounted.add(container)
            try:
                (inspected,) = json.loads(_docker("inspect", container))
                merged, pid = inspected["GraphDriver"]["Data"]["MergedDir"], str(inspected["State"]["Pid"])
                subprocess.run(["mount", "-o", "remount,bind,noatime", merged], check=True, timeout=30)
                nsenter = ["nsenter", "-t", pid, "-m", "mount", "-o", "remount,bind,noatime", "/"]
                subprocess.run(nsenter, check=True, timeout=30)
                _docker("exec", container, "touch", REMOUNTED)
            except (subprocess.SubprocessError, ValueError, KeyError) as exc:  # a helper that ended
                failures.append(f"{container[:12]}: {exc!r}")


def test_a_noatime_container_root_flags_the_plant_by_its_kind(tmp_path: Path) -> None:
    trial_id = new_id("trl")
    failures: list[str] = []
    done = threading.Event()
    remounting = threading.Thread(target=_remount_noatime, args=(trial_id, done, failures))
    remounting.start()
    try:
        outcome = run_trial(tmp_path, PYC_PLANT + WAIT_FOR_REMOUNT, PYTHON_VERIFIER, trial_id=trial_id)
    finally:
        done.set()
        remounting.join(timeout=60)
    assert outcome.error is None, (outcome.error, failures)
    assert outcome.reward == 1.0, "the plant did not run: the test no longer attacks anything"
    paths = named(outcome)
    assert any(path.endswith(".pyc") and "/encodings/__pycache__/" in path for path in paths), outcome.flags
    # Flagged by kind, used or not: a record of what the verifier opened would have left it out.
    assert "/usr/local/bin/never-run" in paths, outcome.flags
    assert "/opt/never-read.txt" not in paths and REMOUNTED not in paths, outcome.flags
    assert all("read by the verifier" not in flag.detail for flag in tampered(outcome)), outcome.flags
