"""Choosing where a job's trials run (`--environment`), as users drive it through `el`, without a
Docker daemon: bad choices refused in one line, the choice kept on the job, `auto` running a task
that needs no image in the local sandbox."""

import pytest

from envloop.services import datasets, profiles
from envloop.services.context import Context
from tests.conftest import EXAMPLES, El


@pytest.fixture
def demo(el: El, ctx: Context) -> El:
    """`el` on a store holding the example tasks as `demo@1` and profile `demo/oracle@1`, set up
    through the services: the tests check what `el` does with them."""
    datasets.push_dataset(ctx, EXAMPLES / "tasks", "demo")
    oracle = profiles.read_profile_file(EXAMPLES / "profiles" / "oracle.json")
    profiles.create_profile(ctx, "demo/oracle", "1", oracle)
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
