"""Task images on a real Docker daemon: built from the locally imported base, once per digest."""

import asyncio
import json
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from envloop.environments.docker.cli import docker_binary
from envloop.environments.docker.container_spec import ContainerSpec
from envloop.environments.docker.containers import running_container
from envloop.environments.docker.engine import image_id
from envloop.environments.docker.images import (
    BuildOutcome,
    BuildRecords,
    ensure_task_image,
    read_build_settings,
    task_image,
)
from tests.docker_daemon import docker_daemon

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon"]


def _digest() -> str:
    return "sha256:" + secrets.token_hex(32)


def _environment(root: Path, dockerfile: str, files: dict[str, str] | None = None) -> Path:
    """An `environment/` directory whose RUN steps are unique, so BuildKit's layer cache (kept by
    the daemon across test runs) can never stand in for running them."""
    env = root / "environment"
    env.mkdir(parents=True)
    token = secrets.token_hex(6)
    (env / "Dockerfile").write_text(dockerfile.replace("@TOKEN@", token))
    for name, content in (files or {}).items():
        (env / name).write_text(content)
    return env


@pytest.fixture
def records(tmp_path: Path) -> BuildRecords:
    return BuildRecords(tmp_path / "artifacts" / "builds")


@pytest.fixture
def built() -> Iterator[list[str]]:
    """Image names a test built, removed afterwards so runs do not pile images up."""
    images: list[str] = []
    yield images
    for image in images:
        subprocess.run([docker_binary(), "rmi", "--force", image], capture_output=True, check=False)


def _build(env: Path, digest: str, records: BuildRecords, network: str | None = None) -> BuildOutcome:
    return asyncio.run(ensure_task_image(env, digest, records, network=network))  # type: ignore[arg-type]


def _run_in(image: str, *command: str) -> tuple[int | None, str, str]:
    async def go() -> tuple[int | None, str, str]:
        async with running_container(ContainerSpec(image=image, trial_id="trl_images")) as container:
            result = await container.exec(list(command))
            return result.exit_code, result.stdout, result.stderr

    return asyncio.run(go())


def test_task_image_is_built_from_the_locally_imported_base_and_recorded(
    tmp_path: Path, records: BuildRecords, built: list[str]
) -> None:
    env = _environment(
        tmp_path,
        "FROM debian:bookworm-slim\nWORKDIR /app\n"
        "COPY --chmod=755 greet.sh /app/greet.sh\nRUN echo @TOKEN@ > /app/id\n",
        {"greet.sh": "#!/bin/sh\necho hello from the image\n"},
    )
    digest = _digest()
    built.append(task_image(digest))

    outcome = _build(env, digest, records)

    assert outcome.status == "built", outcome.reason
    assert not outcome.cache_hit
    assert outcome.image == task_image(digest)
    assert asyncio.run(image_id(outcome.image)) == outcome.image_id
    assert _run_in(outcome.image, "/app/greet.sh") == (0, "hello from the image\n", "")
    record = json.loads(records.record_path(digest).read_text())
    assert record["status"] == "built"
    assert record["image_id"] == outcome.image_id
    assert "naming to" in records.log_path(digest).read_text()


def test_second_build_of_the_same_digest_is_a_cache_hit_and_builds_nothing(
    tmp_path: Path, records: BuildRecords, built: list[str]
) -> None:
    env = _environment(tmp_path, "FROM debian:bookworm\nRUN echo @TOKEN@ > /id\n")
    digest = _digest()
    built.append(task_image(digest))
    first = _build(env, digest, records)
    log_before = records.log_path(digest).read_bytes()
    record_before = records.record_path(digest).read_bytes()

    second = _build(env, digest, records)

    assert first.status == "built"
    assert (second.status, second.cache_hit, second.image_id) == ("cached", True, first.image_id)
    assert records.log_path(digest).read_bytes() == log_before
    assert records.record_path(digest).read_bytes() == record_before


def test_concurrent_builds_of_one_digest_build_it_once(
    tmp_path: Path, records: BuildRecords, built: list[str]
) -> None:
    env = _environment(tmp_path, "FROM debian:bookworm\nRUN echo @TOKEN@ > /id && sleep 1\n")
    digest = _digest()
    built.append(task_image(digest))

    async def both() -> list[BuildOutcome]:
        return list(await asyncio.gather(*(ensure_task_image(env, digest, records) for _ in range(2))))

    outcomes = asyncio.run(both())

    assert sorted(o.status for o in outcomes) == ["built", "cached"]
    assert len({o.image_id for o in outcomes}) == 1


def test_run_step_installs_a_debian_package_over_the_build_network_and_the_trial_can_use_it(
    tmp_path: Path, records: BuildRecords, built: list[str]
) -> None:
    env = _environment(
        tmp_path,
        "FROM debian:bookworm-slim\n"
        "RUN echo @TOKEN@ && apt-get update"
        " && apt-get install -y --no-install-recommends jq && rm -rf /var/lib/apt/lists/*\n",
    )
    digest = _digest()
    built.append(task_image(digest))

    outcome = _build(env, digest, records, network="host")

    assert outcome.status == "built", outcome.reason
    # The trial's container has no network: the package works because it is in the image.
    code, stdout, _ = _run_in(outcome.image, "sh", "-c", "echo '{\"a\": [1, 2]}' | jq -c .a")
    assert (code, stdout) == (0, "[1,2]\n")


def test_a_failing_run_step_is_recorded_as_a_failed_build_with_its_reason(
    tmp_path: Path, records: BuildRecords
) -> None:
    env = _environment(tmp_path, "FROM debian:bookworm\nRUN echo @TOKEN@ && echo broken >&2 && exit 3\n")
    digest = _digest()

    outcome = _build(env, digest, records)

    assert outcome.status == "failed"
    assert outcome.reason is not None and "exit code: 3" in outcome.reason
    assert "\n" not in outcome.reason
    assert asyncio.run(image_id(task_image(digest))) is None
    record = json.loads(records.record_path(digest).read_text())
    assert (record["status"], record["reason"]) == ("failed", outcome.reason)
    assert "broken" in record["log_tail"]


def test_a_build_without_network_cannot_download_packages(tmp_path: Path, records: BuildRecords) -> None:
    env = _environment(
        tmp_path, "FROM debian:bookworm\nRUN echo @TOKEN@; apt-get update; apt-get install -y jq\n"
    )

    outcome = _build(env, _digest(), records, network="none")

    assert outcome.status == "failed"
    assert outcome.reason is not None and "apt-get install -y jq" in outcome.reason


def test_a_base_image_that_is_not_here_is_named_and_never_pulled(
    tmp_path: Path, records: BuildRecords
) -> None:
    env = _environment(tmp_path, "ARG BASE=ubuntu:22.04\nFROM ${BASE} AS build\nFROM build\nRUN true\n")
    digest = _digest()

    outcome = _build(env, digest, records)

    assert outcome.status == "failed"
    assert outcome.reason is not None
    assert outcome.reason.startswith("FROM ubuntu:22.04: base image not available on this machine")
    assert "debian:bookworm" in outcome.reason


def test_a_task_without_a_dockerfile_fails_its_build_saying_so(tmp_path: Path, records: BuildRecords) -> None:
    env = tmp_path / "environment"
    env.mkdir()

    outcome = _build(env, _digest(), records)

    assert outcome.status == "failed"
    assert outcome.reason is not None and outcome.reason.startswith("environment/Dockerfile: missing")


def test_python_slim_image_has_python_3_11_whose_pip_installs_into_the_system(
    tmp_path: Path, records: BuildRecords, built: list[str]
) -> None:
    env = _environment(
        tmp_path,
        "FROM python:3.11-slim\nCOPY pkg /tmp/pkg\n"
        "RUN echo @TOKEN@ && pip install --no-index --no-build-isolation /tmp/pkg\n",
        {},
    )
    (env / "pkg" / "greeting").mkdir(parents=True)
    (env / "pkg" / "greeting" / "__init__.py").write_text("WORDS = 'installed'\n")
    (env / "pkg" / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "greeting"\nversion = "1.0"\n'
    )
    digest = _digest()
    built.append(task_image(digest))

    outcome = _build(env, digest, records)

    assert outcome.status == "built", outcome.reason
    code, stdout, _ = _run_in(
        outcome.image, "python", "-c", "import sys, greeting; print(sys.version_info[:2], greeting.WORDS)"
    )
    assert (code, stdout) == (0, "(3, 11) installed\n")


def test_ubuntu_24_04_is_an_ubuntu_noble_root_with_the_official_images_user_and_sources() -> None:
    script = (
        ". /etc/os-release; echo $ID $VERSION_ID; id -u ubuntu; grep -h ^Suites /etc/apt/sources.list.d/*"
    )

    code, stdout, _ = _run_in("ubuntu:24.04", "sh", "-c", script)

    assert code == 0
    assert stdout.splitlines() == [
        "ubuntu 24.04",
        "1000",
        "Suites: noble noble-updates noble-backports",
        "Suites: noble-security",
    ]


def _task_root(root: Path, environment_toml: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "task.toml").write_text(f'version = "1.0"\n[environment]\n{environment_toml}\n')
    return root


def test_a_tasks_prebuilt_docker_image_is_used_when_it_is_here_and_named_when_it_is_not(
    tmp_path: Path, records: BuildRecords, built: list[str]
) -> None:
    here = _task_root(tmp_path / "here", 'docker_image = "debian:bookworm"')
    away = _task_root(tmp_path / "away", 'docker_image = "ghcr.io/some-org/some-task:20250620"')
    for root in (here, away):
        _environment(root, "FROM debian:bookworm\nRUN exit 1\n")  # never used: the image wins
    digest_here, digest_away = _digest(), _digest()
    built.append(task_image(digest_here))

    used = asyncio.run(
        ensure_task_image(here / "environment", digest_here, records, settings=read_build_settings(here))
    )
    refused = asyncio.run(
        ensure_task_image(away / "environment", digest_away, records, settings=read_build_settings(away))
    )

    assert used.status == "built"
    assert used.image_id == asyncio.run(image_id("debian:bookworm"))
    assert refused.status == "failed"
    assert refused.reason == (
        "docker_image ghcr.io/some-org/some-task:20250620: not available on this machine"
        " (nothing can be pulled)"
    )


def test_a_build_longer_than_the_tasks_build_timeout_fails_saying_so(
    tmp_path: Path, records: BuildRecords
) -> None:
    root = _task_root(tmp_path, "build_timeout_sec = 2")
    env = _environment(root, "FROM debian:bookworm\nRUN echo @TOKEN@ && sleep 60\n")
    digest = _digest()

    outcome = asyncio.run(ensure_task_image(env, digest, records, settings=read_build_settings(root)))

    assert outcome.status == "failed"
    assert outcome.reason == "the build did not finish within 2 s"
    assert outcome.duration_sec < 30
