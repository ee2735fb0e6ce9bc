"""A running background worker keeps the trial settings (`ENVLOOP_*` variables that change what a
trial does) it started with: a submission whose own differ is refused in one line naming each,
before anything is made, rather than left to that worker; one with the same settings uses it, and
once it has gone the next submission starts a worker with its own."""

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from envloop.scheduling.background import is_running
from tests.conftest import EXAMPLES, El, write_profile


def wait_until(condition: Callable[[], bool], what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def submit(el: El, env: dict[str, str] | None = None) -> tuple[int, str]:
    done = el(
        "job", "submit", "--dataset", "demo@1", "--profile", "oracle@1", "--task", "hello-file", "--wait",
        env=env,
    )  # fmt: skip
    return done.code, done.stderr


def worker_pid(home: Path) -> int:
    return int((home / "background-worker.lock").read_text().split()[0])


def test_a_submission_with_other_trial_settings_than_the_running_worker_is_refused_naming_them(
    el: El, home: Path, tmp_path: Path
) -> None:
    el.ok("dataset", "push", str(EXAMPLES / "tasks"), "--name", "demo")
    profile = write_profile(tmp_path / "o.json", {"AGENT_NAME": "oracle"})
    el.ok("profile", "create", "oracle", "1", "--file", str(profile))
    code, stderr = submit(el)
    assert code == 0, stderr
    assert is_running(home)
    first = worker_pid(home)
    jobs = len(el.ok("job", "list", "--json").json())

    code, stderr = submit(el, {"ENVLOOP_DOCKER_BUILD_NETWORK": "host", "ENVLOOP_CGROUP2_ROOT": str(tmp_path)})
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert f"the background worker of this store (pid {first}) runs trials with other settings" in lines[0]
    assert "ENVLOOP_DOCKER_BUILD_NETWORK is 'host' here and unset for it" in lines[0]
    assert "ENVLOOP_CGROUP2_ROOT is set to another value here and unset for it" in lines[0]
    assert str(tmp_path) not in lines[0]  # a path is never quoted
    assert f"kill {first}" in lines[0]
    assert len(el.ok("job", "list", "--json").json()) == jobs  # nothing was made
    assert is_running(home) and worker_pid(home) == first  # and the worker was left alone

    code, stderr = submit(el)  # the worker's own settings: it runs the trials
    assert code == 0, stderr
    assert worker_pid(home) == first

    os.kill(first, signal.SIGTERM)
    wait_until(lambda: not is_running(home), "the worker stops on SIGTERM")
    code, stderr = submit(el, {"ENVLOOP_DOCKER_BUILD_NETWORK": "host"})
    assert code == 0, stderr
    assert worker_pid(home) != first
    recorded = json.loads((home / "background-worker.settings.json").read_text())
    assert recorded == {"pid": worker_pid(home), "settings": {"ENVLOOP_DOCKER_BUILD_NETWORK": "host"}}
    code, stderr = submit(el)
    assert code == 2
    assert "ENVLOOP_DOCKER_BUILD_NETWORK is unset here and 'host' for it" in stderr
