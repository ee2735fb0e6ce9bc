"""Terminal-Bench 1 tasks pushed as they are and run through `el` in Docker: a task whose
run-tests.sh runs pytest from the image's own packages gives the oracle 1 and the nop agent 0, each
test kept as a dimension, and its tests/run-tests.sh the one that runs, as in TB1; one whose
run-tests.sh stops before its summary when the agent's work is missing (as a build that fails does)
gives the nop 0, as TB1 counts it; a task whose run-tests.sh cannot get pytest here (it downloads
it from a host it names) ends unscored with the host, never 0."""

import secrets
import shutil
import sysconfig
from pathlib import Path

import pytest
import yaml

from tests.conftest import El, write_profile
from tests.docker_daemon import docker_daemon
from tests.test_environment_docker import images
from tests.test_tb1_tasks import RUN_TESTS, write_tb1_task

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon", "images"]

PYTEST_PACKAGES = ("_pytest", "pytest", "pluggy", "iniconfig", "packaging", "pygments", "py.py")
"""pytest and what it imports, all pure Python: laid into the image on its PYTHONPATH, since nothing
can be installed from the network here."""

DISTRIBUTIONS = ("pytest", "pluggy", "iniconfig", "packaging", "pygments")


def with_pytest_in_image(task: Path, token: str) -> None:
    site = Path(sysconfig.get_paths()["purelib"])
    for name in PYTEST_PACKAGES:
        source = site / name
        target = task / "pylib" / name
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    for info in site.glob("*.dist-info"):  # pluggy asks for its version by its metadata
        if info.name.split("-")[0].lower() in DISTRIBUTIONS:
            shutil.copytree(info, task / "pylib" / info.name)
    (task / "Dockerfile").write_text(
        f"FROM python:3.11-slim\nRUN echo {token}\n"
        "COPY pylib/ /opt/pylib/\nENV PYTHONPATH=/opt/pylib\nRUN mkdir -p /app\nWORKDIR /app\n"
    )


STOPS_BEFORE_ITS_SUMMARY = """#!/bin/bash
cd /app
test -f answer.txt || { echo 'the build failed: no answer.txt'; exit 1; }
cd "$TEST_DIR"
python3 -m pytest -rA test_outputs.py
"""
"""A run-tests.sh that, like those of compiled tasks, exits before pytest when the work does not build."""

DOWNLOADS_PYTEST = """#!/bin/bash
url=https://no-such-pytest-mirror-5120.com/pytest.whl
python3 -c "import urllib.request; urllib.request.urlretrieve('$url', '/tmp/pytest.whl')" || echo 'no pytest'
"""


def test_a_tb1_task_with_pytest_in_its_image_gives_oracle_1_and_nop_0_and_one_needing_the_network_is_unscored(
    el: El, tmp_path: Path, images: list[str]
) -> None:
    root = tmp_path / "tb1"
    token = secrets.token_hex(6)
    # TB1 runs tests/run-tests.sh when a task has one beside the root's: the root's here would give
    # no summary, so 0, and the oracle's 1 says the folder's ran.
    answer = write_tb1_task(root, "answer", **{"tests__run-tests.sh": RUN_TESTS})
    (answer / "run-tests.sh").write_text("#!/bin/bash\necho 'the root run-tests.sh ran'\nexit 1\n")
    with_pytest_in_image(answer, token)
    with_pytest_in_image(
        write_tb1_task(root, "builds-first", **{"run-tests.sh": STOPS_BEFORE_ITS_SUMMARY}), token
    )
    offline = write_tb1_task(
        root, "downloads-pytest", dockerfile=f"FROM python:3.11-slim\nRUN echo {token}\nWORKDIR /app\n"
    )
    (offline / "run-tests.sh").write_text(DOWNLOADS_PYTEST)
    pushed = el("dataset", "push", str(root), "--name", "tb1")
    assert pushed.code == 0, pushed.stderr
    built = el("dataset", "build", "tb1@1", "--json", timeout=600)
    images.extend(t["image"] for t in built.json()["tasks"])
    assert {t["status"] for t in built.json()["tasks"]} == {"built"}, built.stdout
    trials = {}
    for agent in ("oracle", "nop"):
        profile = write_profile(tmp_path / f"{agent}.json", {"AGENT_NAME": agent})
        el.ok("profile", "create", f"team/{agent}", "1", "--file", str(profile))
        submit = (
            "job",
            "submit",
            "--dataset",
            "tb1@1",
            "--profile",
            f"team/{agent}@1",
            "--environment",
            "docker",
        )
        job = el(*submit, "--wait", "--json", timeout=600).json()
        for trial in el.ok("trial", "list", "--job", job["id"], "--json").json():
            trials[(agent, trial["task"])] = el.ok("trial", "get", trial["id"], "--json").json()
    oracle, nop = trials[("oracle", "answer")], trials[("nop", "answer")]
    assert (oracle["reward"], oracle["sandbox"]) == (1.0, "docker"), oracle
    assert oracle["dimensions"] == {"reward": 1.0, "test_answer_file_exists": 1.0, "test_answer_is_42": 1.0}
    assert nop["reward"] == 0.0, nop
    assert nop["dimensions"] == {"reward": 0.0, "test_answer_file_exists": 0.0, "test_answer_is_42": 0.0}
    built_first = {agent: trials[(agent, "builds-first")] for agent in ("oracle", "nop")}
    assert built_first["oracle"]["reward"] == 1.0, built_first["oracle"]
    assert (built_first["nop"]["reward"], built_first["nop"]["error_type"]) == (0.0, None), built_first["nop"]
    for agent in ("oracle", "nop"):
        unscored = trials[(agent, "downloads-pytest")]
        assert (unscored["reward"], unscored["error_type"]) == (None, "environment_error"), unscored
        assert "no-such-pytest-mirror-5120.com:443 could not be reached" in unscored["error_message"], (
            unscored
        )


SIDECAR_TEST = """import urllib.request


def test_the_sidecar_answers_by_its_name():
    answer = urllib.request.urlopen("http://api:8000/answer.txt", timeout=10).read().decode().strip()
    assert answer == "42"
"""


def test_a_tb1_tasks_other_compose_services_run_as_sidecars_the_client_reaches_by_name(
    el: El, tmp_path: Path, images: list[str]
) -> None:
    token = secrets.token_hex(6)
    task = write_tb1_task(tmp_path / "tb1", "with-api", **{"tests__test_outputs.py": SIDECAR_TEST})
    with_pytest_in_image(task, token)
    compose = yaml.safe_load((task / "docker-compose.yaml").read_text())
    compose["services"]["client"]["depends_on"] = ["api"]
    compose["services"]["api"] = {
        "build": {"context": "api"},
        "image": "${T_BENCH_TASK_DOCKER_NAME_PREFIX}__api",
        "container_name": "${T_BENCH_TASK_DOCKER_NAME_PREFIX}__api",
        "command": ["sh", "-c", "cd /srv && python3 -m http.server 8000"],
    }
    (task / "docker-compose.yaml").write_text(yaml.safe_dump(compose))
    (task / "api").mkdir()
    (task / "api" / "Dockerfile").write_text(
        f"FROM python:3.11-slim\nRUN mkdir -p /srv && echo 42 > /srv/answer.txt && echo {token}\n"
    )
    pushed = el("dataset", "push", str(task), "--name", "tb1-api")
    assert pushed.code == 0, pushed.stderr
    built = el("dataset", "build", "tb1-api@1", "--json", timeout=600)
    images.extend(t["image"] for t in built.json()["tasks"])
    profile = write_profile(tmp_path / "nop.json", {"AGENT_NAME": "nop"})
    el.ok("profile", "create", "team/nop", "1", "--file", str(profile))
    submit = ("job", "submit", "--dataset", "tb1-api@1", "--profile", "team/nop@1", "--environment", "docker")
    job = el(*submit, "--wait", "--json", timeout=600).json()
    (trial,) = el.ok("trial", "list", "--job", job["id"], "--json").json()
    shown = el.ok("trial", "get", trial["id"], "--json").json()
    # Nothing to solve: the tests pass when the client reaches the sidecar by its compose name.
    assert (shown["reward"], shown["dimensions"]) == (
        1.0,
        {"reward": 1.0, "test_the_sidecar_answers_by_its_name": 1.0},
    ), shown


def test_a_tb1_dockerfile_copying_its_solution_and_tests_builds_and_its_oracle_passes(
    el: El, tmp_path: Path, images: list[str]
) -> None:
    token = secrets.token_hex(6)
    task = write_tb1_task(tmp_path / "tb1", "copies-its-own")
    with_pytest_in_image(task, token)
    dockerfile = (task / "Dockerfile").read_text()
    (task / "Dockerfile").write_text(
        dockerfile + "COPY solution.sh /oracle/solution.sh\nCOPY tests/ /app/tests/\n"
    )
    (task / "run-tests.sh").write_text("#!/bin/bash\ncd /app/tests\npython3 -m pytest -rA test_outputs.py\n")
    (task / "solution.sh").write_text("#!/bin/bash\nbash -c 'echo 42' > /app/answer.txt\n")
    pushed = el("dataset", "push", str(task), "--name", "tb1-copies")
    assert pushed.code == 0, pushed.stderr
    built = el("dataset", "build", "tb1-copies@1", "--json", timeout=600)
    images.extend(t["image"] for t in built.json()["tasks"])
    assert [t["status"] for t in built.json()["tasks"]] == ["built"], built.stdout
    profile = write_profile(tmp_path / "oracle.json", {"AGENT_NAME": "oracle"})
    el.ok("profile", "create", "team/oracle", "1", "--file", str(profile))
    submit = (
        "job",
        "submit",
        "--dataset",
        "tb1-copies@1",
        "--profile",
        "team/oracle@1",
        "--environment",
        "docker",
    )
    job = el(*submit, "--wait", "--json", timeout=600).json()
    (trial,) = el.ok("trial", "list", "--job", job["id"], "--json").json()
    shown = el.ok("trial", "get", trial["id"], "--json").json()
    assert shown["reward"] == 1.0, shown
