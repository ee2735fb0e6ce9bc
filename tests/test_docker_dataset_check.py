"""`el dataset check --environment docker`: the same four tasks in containers, and a fifth whose
image does not build, which the check names rather than scoring."""

import json
import secrets
from pathlib import Path

import pytest

from tests.conftest import El, make_task
from tests.docker_daemon import docker_daemon
from tests.test_dataset_check import ALWAYS_PASSES, FLAKY
from tests.test_environment_docker import images

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon", "images"]


def test_a_check_in_docker_names_each_problem_and_an_image_that_does_not_build(
    el: El, tmp_path: Path, images: list[str]
) -> None:
    root = tmp_path / "tasks"
    token = secrets.token_hex(6)  # images of this test's own, removed after it
    tasks = {
        "healthy": make_task(root, "healthy", solve="touch done"),
        "oracle-fails": make_task(root, "oracle-fails", solve="true"),
        "nop-passes": make_task(root, "nop-passes", solve="touch done", test=ALWAYS_PASSES),
        "verifier-flaky": make_task(root, "verifier-flaky", solve="touch done", test=FLAKY),
        "no-image": make_task(root, "no-image", solve="touch done"),
    }
    for name, task in tasks.items():
        step = "exit 3" if name == "no-image" else f"echo {token}-{name}"
        (task / "environment" / "Dockerfile").write_text(
            f"FROM debian:bookworm-slim\nRUN {step}\nWORKDIR /app\n"
        )
    el.ok("dataset", "push", str(root), "--name", "bench")
    try:
        checked = el(
            *("dataset", "check", "bench@1", "--attempts", "3", "--verifier-runs", "10"),
            *("--environment", "docker", "--json"),
            timeout=900,
        )
    finally:
        built = el("dataset", "build", "bench@1", "--json", timeout=600)
        images.extend(t["image"] for t in json.loads(built.stdout)["tasks"] if t.get("status") != "failed")
    assert checked.code == 1, checked.stderr
    verdicts = {task["task"]: task for task in json.loads(checked.stdout)["tasks"]}
    assert verdicts["healthy"]["healthy"] is True, verdicts["healthy"]
    assert verdicts["healthy"]["setup_sec"] is not None
    assert verdicts["oracle-fails"]["problems"] == ["oracle fails: reward 0 in all 3 runs"]
    assert verdicts["nop-passes"]["problems"] == ["nop passes: doing nothing scored 1 in 3 of 3 runs"]
    [flaky] = verdicts["verifier-flaky"]["problems"]
    assert flaky.startswith("verifier flaky: one final state scored "), flaky
    assert flaky.endswith(")") and " in 10 verifier runs (the oracle's attempt " in flaky
    (no_image,) = verdicts["no-image"]["problems"]
    assert no_image.startswith("no verdict in 6 of 6 runs: ") and "did not build" in no_image, no_image
    assert "exit code: 3" in no_image, no_image
    assert [t for t, v in verdicts.items() if v["healthy"]] == ["healthy"]

    # Checked again, the recorded build failure leaves the task out of the job, and it is named.
    again = el(
        "dataset", "check", "bench@1", "--attempts", "1", "--environment", "docker", "--json", timeout=600
    )
    assert again.code == 1, again.stderr
    (recorded,) = next(t for t in json.loads(again.stdout)["tasks"] if t["task"] == "no-image")["problems"]
    assert recorded.startswith("image does not build: ") and "exit code: 3" in recorded, recorded
