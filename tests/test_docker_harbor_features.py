"""Harbor features in the `docker` environment on a real daemon: multi-step tasks with a
`[steps.agent] user` per step, and healthchecks probed inside the container before the agent."""

import secrets
from pathlib import Path

import pytest

from tests.conftest import El, make_task, write_profile
from tests.docker_daemon import docker_daemon
from tests.test_environment_docker import images, run_docker, spec_for, write_task
from tests.test_healthcheck import COUNTING, READY_AND_DONE, healthcheck
from tests.test_multistep import write_steps_task

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon", "images"]

REWARD = "> /logs/verifier/reward.txt"


def with_dockerfile(task: Path, dockerfile: str) -> Path:
    (task / "environment" / "Dockerfile").write_text(dockerfile)
    return task


def test_each_step_runs_its_agent_as_its_own_user_in_the_container(tmp_path: Path, images: list[str]) -> None:
    task = write_steps_task(
        tmp_path / "users",
        [
            ("as-root", f"grep -qx root /app/users && echo 1 {REWARD} || echo 0 {REWARD}\n", ""),
            (
                "as-nobody",
                f"tail -1 /app/users | grep -qx nobody && echo 1 {REWARD} || echo 0 {REWARD}\n",
                "",
            ),
            (
                "as-image-user",
                f"tail -1 /app/users | grep -qx worker && echo 1 {REWARD} || echo 0 {REWARD}\n",
                "",
            ),
        ],
        extra={
            "as-root": '[steps.agent]\nuser = "root"\n',
            "as-nobody": '[steps.agent]\nuser = "nobody"\n',
        },
    )
    with_dockerfile(
        task,
        "FROM debian:12\nRUN useradd --uid 1500 worker && mkdir /app && chmod 777 /app\n"
        "USER worker\nWORKDIR /app\n",
    )
    # The first step's root leaves the file writable for the users of the steps after it.
    command = "id -un >> /app/users && chmod 666 /app/users 2>/dev/null; true"
    params = {"AGENT_NAME": "command", "AGENT_COMMAND": command}
    outcome = run_docker(tmp_path, spec_for(tmp_path, task, params), images)
    assert outcome.error is None, outcome.error
    assert outcome.reward == 1.0
    assert "(steps: as-root root, as-nobody nobody)" in (outcome.sandbox_note or "")
    stdout = tmp_path / "artifacts" / "steps"
    assert sorted(p.name for p in stdout.iterdir()) == ["as-image-user", "as-nobody", "as-root"]


def test_a_step_user_the_image_lacks_is_refused_before_any_agent_runs(
    tmp_path: Path, images: list[str]
) -> None:
    task = write_steps_task(
        tmp_path / "ghost",
        [("first", f"echo 1 {REWARD}\n", "touch /app/first\n"), ("second", f"echo 1 {REWARD}\n", "")],
        extra={"second": '[steps.agent]\nuser = "ghost"\n'},
    )
    with_dockerfile(task, "FROM debian:12\nWORKDIR /app\n")
    outcome = run_docker(tmp_path, spec_for(tmp_path, task, {"AGENT_NAME": "oracle"}), images)
    assert outcome.reward is None
    assert outcome.error is not None and outcome.error.type == "environment_error"
    assert (
        "step 'second': [steps.agent] user = 'ghost': not a user of the task's image" in outcome.error.message
    )


def test_the_healthcheck_is_probed_in_the_container_before_the_agent(
    tmp_path: Path, images: list[str]
) -> None:
    toml = healthcheck(COUNTING.format(app="/app", n=2), interval_sec=0.1, retries=3)
    solve = "#!/usr/bin/env bash\ntest -f /app/ready && touch /app/done\n"
    task = write_task(tmp_path / "healthy", toml=toml, test_sh=READY_AND_DONE, solve_sh=solve)
    outcome = run_docker(tmp_path, spec_for(tmp_path, task, {"AGENT_NAME": "oracle"}), images)
    assert outcome.error is None, outcome.error
    assert outcome.reward == 1.0
    assert "probe 3 passed" in (tmp_path / "artifacts" / "setup" / "output.txt").read_text()


def test_a_container_that_never_becomes_healthy_is_an_environment_error(
    tmp_path: Path, images: list[str]
) -> None:
    toml = healthcheck("curl -sf http://127.0.0.1:9/health", interval_sec=0.1, retries=2)
    task = write_task(tmp_path / "sick", toml=toml)
    outcome = run_docker(tmp_path, spec_for(tmp_path, task, {"AGENT_NAME": "oracle"}), images)
    assert outcome.reward is None
    assert outcome.error is not None and outcome.error.type == "environment_error"
    assert "[environment.healthcheck] never passed" in outcome.error.message
    assert "exit 127" in outcome.error.message  # no curl in the image: said, not scored


def test_auto_refuses_a_task_whose_image_failed_to_build_and_skip_unsupported_leaves_it_out(
    el: El, tmp_path: Path, images: list[str]
) -> None:
    root = tmp_path / "tasks"
    token = secrets.token_hex(6)
    good = make_task(root, "alpha", solve='touch "$ENVLOOP_APP_DIR/done"')
    (good / "environment" / "Dockerfile").write_text(f"FROM debian:12\nRUN echo {token}\nWORKDIR /app\n")
    plain = make_task(root, "gamma", solve='touch "${ENVLOOP_APP_DIR:-/app}/done"')
    (plain / "environment" / "Dockerfile").write_text("FROM alpine:3.20\nWORKDIR /app\n")
    broken = make_task(root, "beta")
    (broken / "environment" / "Dockerfile").write_text(f"FROM debian:12\nRUN echo {token} && exit 3\n")
    el.ok("dataset", "push", str(root), "--name", "dock")
    built = el("dataset", "build", "dock@1", "--json", timeout=300)
    images.extend(t["image"] for t in built.json()["tasks"] if t["status"] != "failed")
    profile = write_profile(tmp_path / "p.json", {"AGENT_NAME": "oracle"})
    el.ok("profile", "create", "team/oracle", "1", "--file", str(profile))
    submit = ("job", "submit", "--dataset", "dock@1", "--profile", "team/oracle@1", "--environment", "auto")

    refused = el(*submit)
    assert refused.code == 2
    # gamma's base image is not here either, but auto runs it locally (a bare FROM needs no container).
    assert "1 task(s) whose image failed to build cannot run in docker: beta (" in refused.stderr
    assert "exit code: 3" in refused.stderr
    assert "--skip-unsupported" in refused.stderr
    assert el("job", "list", "--json").json() == []

    job = el.ok(*submit, "--skip-unsupported", "--wait", "--json", timeout=300).json()
    assert job["tasks"] == ["alpha", "gamma"]
    [skipped] = job["skipped"]
    assert skipped["task"] == "beta"
    assert skipped["reason"].startswith("its image failed to build: ")
    assert "exit code: 3" in skipped["reason"]
    trials = el.ok("trial", "list", "--job", job["id"], "--json").json()
    assert sorted((t["task"], t["reward"], t["sandbox"]) for t in trials) == [
        ("alpha", 1.0, "docker"),
        ("gamma", 1.0, "bwrap"),
    ]


def test_a_steps_workdir_and_setup_reach_the_container_before_its_agent(
    tmp_path: Path, images: list[str]
) -> None:
    check = (
        '[ "$(cat /app/data/batch.txt)" = two ] && [ "$(cat /app/prepared-by)" = nobody ] '
        f"&& echo 1 {REWARD} || echo 0 {REWARD}\n"
    )
    task = write_steps_task(
        tmp_path / "batches",
        [("first", f"echo 1 {REWARD}\n", ""), ("second", check, "")],
        extra={"second": '[steps.agent]\nuser = "nobody"\n'},
    )
    with_dockerfile(task, "FROM debian:12\nRUN mkdir /app && chmod 777 /app\nWORKDIR /app\n")
    inputs = task / "steps" / "second" / "workdir"
    (inputs / "data").mkdir(parents=True)
    (inputs / "data" / "batch.txt").write_text("two")
    (inputs / "setup.sh").write_text("id -un > /app/prepared-by\n")
    outcome = run_docker(tmp_path, spec_for(tmp_path, task, {"AGENT_NAME": "nop"}), images)
    assert outcome.error is None, outcome.error
    assert outcome.reward == 1.0
