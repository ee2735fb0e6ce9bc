"""The Docker daemon and base image the docker tests run against, set up once per test session.

`scripts/test` starts the daemon (scripts/docker-daemon) and makes the base images before pytest;
a bare `pytest` starts a daemon itself when none answers, and stops it at the end when it ran in one
process; with xdist the daemon stays, since one worker's session may end while another's still uses
it. Where no daemon can start, the tests fail loudly under CI=true and are skipped elsewhere, with
the reason.
"""

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envloop.environments.docker.base_images import ensure_base_images
from envloop.environments.docker.cli import DockerError, DockerUnavailableError, daemon_version
from envloop.environments.docker.engine import engine
from envloop.environments.docker.orphans import trial_containers

REPO = Path(__file__).resolve().parents[1]


def _version() -> tuple[str | None, str]:
    """(the daemon's version, or None and why not)."""
    try:
        return asyncio.run(daemon_version()), ""
    except (DockerUnavailableError, OSError) as exc:
        return None, str(exc)


@pytest.fixture(scope="session")
def docker_daemon() -> Iterator[str]:
    """The daemon's version, with the base images (and their aliases) present."""
    script = str(REPO / "scripts" / "docker-daemon")
    version, why = _version()
    started = False
    if version is None:
        start = subprocess.run([script, "start"], capture_output=True, text=True, check=False)
        started = start.returncode == 0 and start.stdout.strip() == "started"
        started = started and "PYTEST_XDIST_WORKER" not in os.environ
        version, why = _version()
        if version is None:
            reason = f"no Docker daemon could be started: {start.stderr.strip() or why}"
            if os.environ.get("CI"):
                pytest.fail(reason)
            pytest.skip(reason)
    ensure_base_images(log=lambda message: None)
    yield version
    if started:
        subprocess.run([script, "stop"], check=False)


async def container_commands(name: str) -> list[str]:
    """The command lines of a container's processes, read from the host (as `docker top`): it needs
    no process inside, so it works in a container whose pids are all taken. None yet running: []."""
    try:
        top = await engine().json("GET", f"/containers/{name}/top")
    except DockerError:  # created and not started yet, or stopped and gone meanwhile
        return []
    return [str(row[-1]) for row in (top or {}).get("Processes") or []]


async def command_running(trial_id: str, command: str, timeout: float = 120) -> None:
    """Wait until a container of the trial runs `command` (its whole command line): the moment a
    test cancels or kills a trial mid-command, instead of a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        for name in await trial_containers(trial_id):
            if command in await container_commands(name):
                return
        assert time.monotonic() < deadline, f"{command!r} never ran in a container of {trial_id}"
        await asyncio.sleep(0.05)
