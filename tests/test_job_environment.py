"""Choosing where a job's trials run (`--environment`), as users drive it through `el`, without a
Docker daemon: bad choices refused in one line, the choice kept on the job, `auto` running a task
that needs no image in the local sandbox."""

import pytest

from tests.conftest import EXAMPLES, El


@pytest.fixture
def demo(el: El) -> El:
    el.ok("dataset", "push", str(EXAMPLES / "tasks"), "--name", "demo")
    el.ok("profile", "create", "demo/oracle", "1", "--file", str(EXAMPLES / "profiles" / "oracle.json"))
    return el


def test_an_unknown_environment_is_refused_in_one_line_and_creates_no_job(demo: El) -> None:
    refused = demo(
        "job", "submit", "--dataset", "demo@1", "--profile", "demo/oracle@1", "--environment", "vm"
    )
    assert refused.code == 2
    assert refused.stderr.count("\n") == 1 and "environment" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert demo("job", "list", "--json").json() == []
    worker = demo("worker", "--environment", "vm")
    assert (worker.code, worker.stderr) == (
        2,
        "el: error: --environment 'vm': expected local, docker or auto\n",
    )


def test_the_choice_is_kept_on_the_job_and_auto_runs_a_task_without_build_steps_locally(demo: El) -> None:
    submit = ("job", "submit", "--dataset", "demo@1", "--profile", "demo/oracle@1")
    default = demo.ok(*submit, "--task", "sum-numbers", "--json").json()
    assert default["environment"] is None
    auto = demo.ok(
        *submit, "--task", "hello-file", "--environment", "auto", "--wait", "--json", timeout=300
    ).json()
    assert auto["environment"] == "auto"
    [trial] = demo.ok("trial", "list", "--job", auto["id"], "--json").json()
    assert (trial["status"], trial["reward"], trial["sandbox"]) == ("completed", 1.0, "bwrap")
