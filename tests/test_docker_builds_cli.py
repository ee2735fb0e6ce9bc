"""`el dataset build` on a real Docker daemon: each task's build reported, failures named, cache hits."""

import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from envloop.environments.docker.cli import docker_binary
from tests.conftest import El, make_task
from tests.docker_daemon import docker_daemon

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon"]


@pytest.fixture
def images() -> Iterator[list[str]]:
    """Images a test built, removed afterwards."""
    built: list[str] = []
    yield built
    for image in built:
        subprocess.run([docker_binary(), "rmi", "--force", image], capture_output=True, check=False)


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    """Two buildable tasks with fresh content (so never in the cache yet) and one whose base image
    is not on this machine."""
    root = tmp_path / "tasks"
    token = secrets.token_hex(6)
    for name in ("alpha", "beta"):
        task = make_task(root, name)
        (task / "environment" / "Dockerfile").write_text(
            f"FROM debian:bookworm-slim\nWORKDIR /app\nRUN echo {name}-{token} > /app/id\n"
        )
    broken = make_task(root, "gamma")
    (broken / "environment" / "Dockerfile").write_text("FROM python:3.12-slim\nRUN true\n")
    return root


def test_dataset_build_reports_each_task_and_exits_1_naming_the_failed_one(
    el: El, tasks: Path, images: list[str]
) -> None:
    el.ok("dataset", "push", str(tasks), "--name", "imgs")

    first = el("dataset", "build", "imgs@1", "--json", timeout=300)
    images.extend(t["image"] for t in first.json()["tasks"])
    second = el("dataset", "build", "imgs@1", "--json", timeout=300)
    table = el("dataset", "build", "imgs@1", timeout=300)

    assert first.code == 1, first.stderr
    report = first.json()
    by_task = {t["task"]: t for t in report["tasks"]}
    assert (report["built"], report["cached"], report["failed"]) == (2, 0, 1)
    assert by_task["alpha"]["status"] == by_task["beta"]["status"] == "built"
    assert by_task["gamma"]["status"] == "failed"
    assert by_task["gamma"]["reason"].startswith("FROM python:3.12-slim: base image not available")
    assert all(t["image"] == "envloop/task:" + t["digest"].split(":")[1] for t in report["tasks"])

    again = {t["task"]: t for t in second.json()["tasks"]}
    assert (again["alpha"]["status"], again["alpha"]["cache_hit"]) == ("cached", True)
    assert (again["beta"]["status"], again["beta"]["cache_hit"]) == ("cached", True)
    assert again["gamma"]["status"] == "failed"

    assert table.code == 1
    assert "imgs@1: 0 built, 2 cached, 1 failed" in table.stdout
    assert "gamma: failed" in table.stderr


def test_dataset_build_refuses_bad_input_in_one_line(el: El, tasks: Path) -> None:
    el.ok("dataset", "push", str(tasks), "--name", "imgs")

    unknown = el("dataset", "build", "nope@1")
    network = el("dataset", "build", "imgs@1", "--network", "bridge")

    assert (unknown.code, unknown.stderr) == (2, "el: error: unknown dataset 'nope@1'\n")
    assert (network.code, network.stderr) == (
        2,
        "el: error: build network 'bridge': expected default, host or none\n",
    )
