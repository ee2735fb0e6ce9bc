"""`el` against a server (ENVLOOP_URL, ENVLOOP_API_KEY): the same commands, the same output.

The commands run from a home with no store of its own, so everything they show came over HTTP.
"""

from pathlib import Path

import pytest

from tests.api_server import Server
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.slow


def test_every_step_of_an_evaluation_works_over_http_with_the_same_output(
    busy_server: Server, tmp_path: Path
) -> None:
    empty_home = tmp_path / "elsewhere"
    remote = {
        "ENVLOOP_URL": busy_server.url,
        "ENVLOOP_API_KEY": busy_server.key,
        "ENVLOOP_HOME": str(empty_home),
    }
    el = busy_server.el

    def over_http(*args: str) -> str:
        result = el(*args, env=remote, timeout=300)
        assert result.code == 0, result.stderr
        return result.stdout

    pushed = el(*("dataset", "push", str(EXAMPLES / "tasks"), "--name", "remote", "--json"), env=remote)
    assert pushed.code == 0, pushed.stderr
    assert pushed.json()["ref"] == "remote@1"
    over_http("profile", "create", "demo/oracle", "1", "--file", str(EXAMPLES / "profiles" / "oracle.json"))
    job = el(
        *("job", "submit", "--dataset", "remote@1", "--profile", "demo/oracle@1", "--task", "hello-file"),
        *("--task", "partial-credit", "--attempts", "2", "--wait", "--json"),
        env=remote,
        timeout=300,
    ).json()
    assert job["status"] == "completed"
    for command in (
        ("job", "result", job["id"]),
        ("job", "get", job["id"]),
        ("trial", "list", "--job", job["id"]),
        ("dataset", "show", "remote@1"),
        ("profile", "show", "demo/oracle@1"),
        ("runner", "list", "--json"),
    ):
        assert over_http(*command) == el.ok(*command).stdout, command
    assert not (empty_home / "envloop.db").exists()
    trial = el.ok("trial", "list", "--job", job["id"], "--json").json()[0]["id"]
    assert (
        over_http("trial", "logs", trial, "--phase", "verifier")
        == el.ok("trial", "logs", trial, "--phase", "verifier").stdout
    )
    copied = tmp_path / "copied"
    over_http("trial", "artifacts", trial, "--output", str(copied))
    assert (copied / "verifier" / "reward.txt").read_text().strip() == "1"


def test_errors_over_http_are_the_same_one_line_exit_2(busy_server: Server, tmp_path: Path) -> None:
    remote = {
        "ENVLOOP_URL": busy_server.url,
        "ENVLOOP_API_KEY": busy_server.key,
        "ENVLOOP_HOME": str(tmp_path),
    }
    result = busy_server.el("dataset", "show", "nope@1", env=remote)
    assert result.code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "nope@1" in result.stderr
    wrong_key = dict(remote, ENVLOOP_API_KEY="el_not_a_key")
    denied = busy_server.el("job", "list", env=wrong_key)
    assert denied.code == 2 and len(denied.stderr.strip().splitlines()) == 1
