"""The tests' `el` (tests/preloaded_el.py) answers as a fresh `python -m envloop` does: the same exit
codes and output, each call with only its own environment and directory, killed past its timeout."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import PRELOADED, El, make_task


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("job", "--help"),
        ("bogus",),
        ("job", "get", "job_nope"),
        ("job", "list", "--json"),
        ("dataset", "push", "no-such-dir", "--name", "x"),
        ("profile", "create", "team/p", "1", "--param", "AGENT_NAME=command"),
        ("profile", "list"),
    ],
)
def test_a_call_answers_as_a_fresh_interpreter_does(el: El, args: tuple[str, ...]) -> None:
    el.home.mkdir(parents=True)
    fresh = el.fresh(*args)
    if args[0] == "profile" and args[1] == "create":  # it changes the home: a second one is refused
        fresh = el.fresh(*args)
    assert el(*args) == fresh


def test_each_call_has_its_own_environment_and_directory(el: El, tmp_path: Path) -> None:
    make_task(tmp_path / "tasks", "one")
    el.ok("dataset", "push", "tasks", "--name", "here")  # relative to the call's directory
    other = El(home=tmp_path / "other-home", cwd=tmp_path)
    assert [d["name"] for d in el.ok("dataset", "list", "--json").json()] == ["here"]
    assert other.ok("dataset", "list", "--json").json() == []
    broken = el("dataset", "list", env={"ENVLOOP_DATABASE_URL": "mysql://nowhere/x"})
    assert broken.code == 2 and "ENVLOOP_DATABASE_URL" in broken.stderr
    assert el.ok("dataset", "list", "--json").json()[0]["name"] == "here"  # nothing carried over


def test_a_call_past_its_timeout_is_killed(el: El) -> None:
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        el("worker", "--idle-exit", "600", timeout=3)
    assert time.monotonic() - started < 30
    assert el.ok("job", "list").code == 0


def test_a_python_variable_gets_a_fresh_interpreter(el: El) -> None:
    assert not PRELOADED.runs({**os.environ, "PYTHONPATH": "elsewhere"})
    result = el("--help", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert result.code == 0
    assert "| encodings" in result.stderr  # imported at an interpreter's start: only a fresh one reports it


def test_a_preloading_process_that_died_is_started_again_at_the_next_call(el: El) -> None:
    el.ok("--help")
    assert PRELOADED.process is not None
    PRELOADED.process.kill()
    PRELOADED.process.wait()
    assert el.ok("--help").stdout.startswith("Usage: el ")
    assert PRELOADED.process.poll() is None
