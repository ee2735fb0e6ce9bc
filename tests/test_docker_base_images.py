"""Images a task names that cannot be pulled here, on a real daemon: python:3.13-slim, uv's images made
from its wheel, `# syntax=` lines, the operator's substitutions, and tasks refused at submission."""

import asyncio
import json
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from envloop.environments.docker.cli import docker_binary
from envloop.environments.docker.images import BuildOutcome, BuildRecords, ensure_task_image
from envloop.environments.docker.uv_images import PINNED_UV_VERSION, UV_WHEEL_LABEL
from tests.conftest import El, make_task, write_profile
from tests.docker_daemon import docker_daemon
from tests.test_docker_images import _build, _digest, _environment, _run_in, built, records

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["built", "docker_daemon", "records"]

SUBSTITUTE_312 = {"ENVLOOP_IMAGE_SUBSTITUTES": "python:3.12-slim=python:3.13-slim"}


def _label(image: str, label: str) -> str:
    done = subprocess.run(
        [docker_binary(), "image", "inspect", "--format", f'{{{{index .Config.Labels "{label}"}}}}', image],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_python_3_13_slim_builds_a_pip_install_from_the_registry_and_runs_python_3_13(
    tmp_path: Path, records: BuildRecords, built: list[str]
) -> None:
    env = _environment(
        tmp_path, "FROM python:3.13-slim\nRUN echo @TOKEN@ && pip install --no-cache-dir six\n"
    )
    digest = _digest()

    outcome = _build(env, digest, records, network="host")
    built.append(outcome.image)

    assert outcome.status == "built", outcome.reason
    code, stdout, _ = _run_in(
        outcome.image, "python", "-c", "import six, sys; print(sys.version_info[:2], six.__file__)"
    )
    assert (code, stdout) == (0, "(3, 13) /usr/local/lib/python3.13/dist-packages/six.py\n")


def test_uv_latest_is_the_pinned_wheels_static_binaries_copied_into_any_image(
    tmp_path: Path, records: BuildRecords, built: list[str]
) -> None:
    env = _environment(
        tmp_path,
        "FROM debian:bookworm\nCOPY --from=ghcr.io/astral-sh/uv:latest /uv /uvx /bin/\nRUN echo @TOKEN@\n",
    )

    outcome = _build(env, _digest(), records)
    built.append(outcome.image)

    assert outcome.status == "built", outcome.reason
    code, stdout, _ = _run_in(outcome.image, "sh", "-c", "uv --version && uvx --version")
    assert code == 0
    assert [line.split()[:2] for line in stdout.splitlines()] == [
        ["uv", PINNED_UV_VERSION],
        ["uvx", PINNED_UV_VERSION],
    ]


def test_a_versioned_uv_tag_is_made_on_demand_from_that_versions_wheel_and_says_which(
    tmp_path: Path, records: BuildRecords, built: list[str]
) -> None:
    for made in ("ghcr.io/astral-sh/uv:0.9.7", "envloop/uv:0.9.7"):
        subprocess.run([docker_binary(), "rmi", made], capture_output=True, check=False)
    env = _environment(
        tmp_path,
        "FROM python:3.13-slim\nCOPY --from=ghcr.io/astral-sh/uv:0.9.7 /uv /uvx /bin/\nRUN echo @TOKEN@\n",
    )
    digest = _digest()

    outcome = _build(env, digest, records)
    built.append(outcome.image)

    assert outcome.status == "built", outcome.reason
    assert _run_in(outcome.image, "uv", "--version")[:2] == (0, "uv 0.9.7\n")
    wheel = _label("ghcr.io/astral-sh/uv:0.9.7", UV_WHEEL_LABEL)
    assert wheel.startswith("uv-0.9.7-py3-none-musllinux_") and wheel.endswith(".whl")
    record = json.loads(records.record_path(digest).read_text())
    assert record["notes"] == [f"ghcr.io/astral-sh/uv:0.9.7 made from {wheel}"]
    assert f"envloop: ghcr.io/astral-sh/uv:0.9.7: made from {wheel}" in records.log_path(digest).read_text()


def test_a_uv_version_without_a_wheel_fails_the_build_naming_the_image_and_pips_reason(
    tmp_path: Path, records: BuildRecords
) -> None:
    env = _environment(tmp_path, "FROM debian:bookworm\nCOPY --from=ghcr.io/astral-sh/uv:0.0.999 /uv /bin/\n")

    outcome = _build(env, _digest(), records)

    assert outcome.status == "failed"
    assert outcome.reason is not None
    assert outcome.reason.startswith(
        "COPY --from ghcr.io/astral-sh/uv:0.0.999: could not be made from uv's wheel (pip download "
        "uv==0.0.999 failed: "
    )
    assert "\n" not in outcome.reason


def test_a_standard_syntax_line_builds_with_the_built_in_frontend_and_the_log_says_so(
    tmp_path: Path, records: BuildRecords, built: list[str]
) -> None:
    env = _environment(
        tmp_path,
        "# syntax=docker/dockerfile:1.7\n# a comment after the directive\n"
        "FROM debian:bookworm-slim\nRUN echo @TOKEN@ > /id\n",
    )
    digest = _digest()

    outcome = _build(env, digest, records)
    built.append(outcome.image)

    # Nothing can be pulled here: the build succeeding is the proof that no frontend was pulled.
    assert outcome.status == "built", outcome.reason
    note = (
        "# syntax=docker/dockerfile:1.7: built with the daemon's built-in Dockerfile frontend "
        "(its image cannot be pulled here)"
    )
    assert records.log_path(digest).read_text().startswith(f"envloop: {note}\n")
    assert json.loads(records.record_path(digest).read_text())["notes"] == [note]
    assert not records.dockerfile_path(digest).read_text().startswith("# syntax")


def test_a_foreign_frontend_is_refused_with_one_line_and_the_builder_never_runs(
    tmp_path: Path, records: BuildRecords
) -> None:
    env = _environment(
        tmp_path, "# syntax=docker/dockerfile:1.7-labs\nFROM debian:bookworm\nRUN echo @TOKEN@\n"
    )
    digest = _digest()

    outcome = _build(env, digest, records)

    assert (outcome.status, outcome.reason) == (
        "failed",
        "# syntax=docker/dockerfile:1.7-labs: only the standard frontend docker/dockerfile:1.x can build "
        "here (the daemon's built-in one); this one would have to be pulled",
    )
    assert "#1 " not in records.log_path(digest).read_text()  # no builder step ran


def test_a_substituted_build_is_its_own_image_and_record_and_changing_the_map_rebuilds(
    tmp_path: Path, records: BuildRecords, built: list[str]
) -> None:
    env = _environment(tmp_path, "FROM python:3.12-slim\nRUN echo @TOKEN@ && python --version > /v\n")
    digest = _digest()

    def build(substitutes: dict[str, str]) -> BuildOutcome:
        outcome = asyncio.run(ensure_task_image(env, digest, records, substitutes=substitutes))
        built.append(outcome.image)
        return outcome

    without = build({})
    on_313 = build({"python:3.12-slim": "python:3.13-slim"})
    again = build({"python:3.12-slim": "python:3.13-slim", "alpine:3.22": "debian:13"})
    on_311 = build({"python:3.12-slim": "python:3.11-slim"})

    assert without.status == "failed"
    assert on_313.status == "built" and on_313.image != without.image
    assert (again.status, again.image) == ("cached", on_313.image)
    assert on_311.status == "built" and on_311.image not in (on_313.image, without.image)
    assert _run_in(on_313.image, "cat", "/v")[1].startswith("Python 3.13.")
    assert _run_in(on_311.image, "cat", "/v")[1].startswith("Python 3.11.")
    key = "sha256:" + on_313.image.split(":", 1)[1]
    record = json.loads(records.record_path(key).read_text())
    assert record["substitutions"] == [
        {"original": "python:3.12-slim", "substitute": "python:3.13-slim", "where": ["FROM"]}
    ]
    assert records.dockerfile_path(key).read_text().startswith("FROM python:3.13-slim\n")
    assert json.loads(records.record_path(digest).read_text())["status"] == "failed"


@pytest.fixture
def task_images() -> Iterator[list[str]]:
    """Digests of tasks whose images a test's jobs built; every image of theirs is removed after."""
    digests: list[str] = []
    yield digests
    for digest in digests:
        listed = subprocess.run(
            [docker_binary(), "image", "ls", "-q", "--filter", f"label=envloop.task-digest={digest}"],
            capture_output=True,
            text=True,
            check=False,
        )
        for found in set(listed.stdout.split()):
            subprocess.run([docker_binary(), "rmi", "--force", found], capture_output=True, check=False)


def _oracle_job(el: El, tmp_path: Path, name: str, task_images: list[str]) -> tuple[str, ...]:
    """Push the tasks under `tmp_path/tasks` as NAME@1; the submit command of an oracle job on it
    in docker."""
    el.ok("dataset", "push", str(tmp_path / "tasks"), "--name", name)
    shown = el.ok("dataset", "show", f"{name}@1", "--json").json()
    task_images.extend(member["digest"] for member in shown["members"])
    profile = write_profile(tmp_path / "p.json", {"AGENT_NAME": "oracle"})
    el.ok("profile", "create", "team/oracle", "1", "--file", str(profile))
    return ("job", "submit", "--dataset", f"{name}@1", "--profile", "team/oracle@1",
            "--environment", "docker")  # fmt: skip


def test_a_python_312_task_is_refused_without_a_substitution_and_runs_on_313_with_one_every_trial_says(
    el: El, tmp_path: Path, task_images: list[str]
) -> None:
    root = tmp_path / "tasks"
    task = make_task(root, "py", solve='touch "$ENVLOOP_APP_DIR/done"')
    (task / "environment" / "Dockerfile").write_text(
        f"FROM python:3.12-slim\nRUN python -c 'import sys; assert sys.version_info[:2] == (3, 13)' "
        f"&& echo {secrets.token_hex(6)}\nWORKDIR /app\n"
    )
    submit = _oracle_job(el, tmp_path, "py", task_images)

    refused = el(*submit)
    bad_map = el(*submit, env={"ENVLOOP_IMAGE_SUBSTITUTES": "python:3.12-slim"})
    ran = el(*submit, "--attempts", "2", "--wait", "--json", timeout=300, env=SUBSTITUTE_312)

    assert refused.code == 2
    assert refused.stderr.startswith(
        "el: error: 1 task(s) need an image this machine neither has nor can make: py (FROM "
        "python:3.12-slim: base image not available on this machine (no Debian release has Python 3.12"
    )
    assert "ENVLOOP_IMAGE_SUBSTITUTES=python:3.12-slim=python:3.13-slim" in refused.stderr
    assert refused.stderr.count("\n") == 1
    assert (bad_map.code, bad_map.stderr) == (
        2,
        "el: error: ENVLOOP_IMAGE_SUBSTITUTES: 'python:3.12-slim' is not FROM=TO (expected "
        "comma-separated FROM=TO pairs, such as python:3.12-slim=python:3.13-slim)\n",
    )
    assert ran.code == 0, ran.stderr
    trials = el.ok("trial", "list", "--job", ran.json()["id"], "--json").json()
    assert [t["reward"] for t in trials] == [1.0, 1.0]
    line = (
        "image substituted (ENVLOOP_IMAGE_SUBSTITUTES): FROM python:3.12-slim was built with "
        "python:3.13-slim instead"
    )
    for trial in trials:
        assert line in el.ok("trial", "get", trial["id"], "--json").json()["warnings"]
    [record] = [
        json.loads(path.read_text())
        for path in (el.home / "artifacts" / "builds").glob("*.json")
        if json.loads(path.read_text())["substitutions"]
    ]
    assert record["status"] == "built" and record["notes"] == [line]


def test_an_alpine_task_is_refused_at_submission_naming_why_and_skip_unsupported_runs_the_rest(
    el: El, tmp_path: Path, task_images: list[str]
) -> None:
    root = tmp_path / "tasks"
    good = make_task(root, "alpha", solve='touch "$ENVLOOP_APP_DIR/done"')
    (good / "environment" / "Dockerfile").write_text(
        f"FROM debian:12\nRUN echo {secrets.token_hex(6)}\nWORKDIR /app\n"
    )
    alpine = make_task(root, "hello-alpine")
    (alpine / "environment" / "Dockerfile").write_text("FROM alpine:3.22\nWORKDIR /app\n")
    submit = _oracle_job(el, tmp_path, "mixed", task_images)

    refused = el(*submit)
    assert refused.code == 2
    assert refused.stderr.startswith(
        "el: error: 1 task(s) need an image this machine neither has nor can make: hello-alpine (FROM "
        "alpine:3.22: base image not available on this machine (nothing can be pulled here; images here: "
    )
    assert "--skip-unsupported" in refused.stderr and refused.stderr.count("\n") == 1
    assert el("job", "list", "--json").json() == []

    ran = el(*submit, "--skip-unsupported", "--wait", "--json", timeout=300)
    assert ran.code == 0, ran.stderr
    job = ran.json()
    assert job["tasks"] == ["alpha"]
    [skipped] = job["skipped"]
    assert skipped["task"] == "hello-alpine"
    assert skipped["reason"].startswith(
        "its image cannot be built here: FROM alpine:3.22: base image not available on this machine"
    )
    assert "task hello-alpine not run: its image cannot be built here: FROM alpine:3.22" in ran.stderr
    trials = el.ok("trial", "list", "--job", job["id"], "--json").json()
    assert [(t["task"], t["reward"]) for t in trials] == [("alpha", 1.0)]
