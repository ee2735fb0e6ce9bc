"""Builds that see nothing of the host or of other tasks, attacked on a real daemon.

A Dockerfile that `ADD`s a URL of a service on the host's loopback or on one of its addresses, two
tasks that name the same cache mount, and a task that builds on, copies from or runs another
task's image (one holding a secret, as a separate verifier's holds hidden tests): each ends in a
one-line refusal, and nothing of the host or of the other task reaches the image.
"""

import asyncio
import http.server
import secrets
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.trial import TrialSpec
from envloop.environments.docker import builder
from envloop.environments.docker.base_images import DEBIAN_IMAGE
from envloop.environments.docker.cli import docker_binary
from envloop.environments.docker.images import (
    BuildNetwork,
    BuildOutcome,
    BuildRecords,
    BuildSettings,
    ensure_task_image,
)
from envloop.environments.docker.provider import DockerEnvironmentProvider
from envloop.runners import ShellRunner
from tests.conftest import El, make_task, write_profile
from tests.docker_daemon import docker_daemon
from tests.registries import host_addresses

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon"]

SECRET = "host-secret-" + secrets.token_hex(8)


class _Secret(http.server.BaseHTTPRequestHandler):
    asked: list[str] = []

    def do_GET(self) -> None:
        _Secret.asked.append(self.path)
        body = SECRET.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def secret_server() -> Iterator[tuple[int, list[str]]]:
    """An HTTP service on every host address (loopback included) serving a secret; (port, paths asked)."""
    _Secret.asked = []
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), _Secret)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], _Secret.asked
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def images() -> Iterator[list[str]]:
    """Images a test built, removed afterwards."""
    built: list[str] = []
    yield built
    for image in built:
        subprocess.run([docker_binary(), "rmi", "--force", image], capture_output=True, check=False)


def build(
    tmp_path: Path,
    name: str,
    dockerfile: str,
    images: list[str],
    settings: BuildSettings | None = None,
    network: BuildNetwork | None = "none",
) -> BuildOutcome:
    context = tmp_path / name
    context.mkdir()
    (context / "Dockerfile").write_text(dockerfile)
    digest = "sha256:" + secrets.token_hex(32)
    outcome = asyncio.run(
        ensure_task_image(
            context, digest, BuildRecords(tmp_path / "builds"), network=network, settings=settings
        )
    )
    images.append(outcome.image)
    return outcome


def run_in(image: str, command: str) -> str:
    done = subprocess.run(
        [docker_binary(), "run", "--rm", "--network", "none", image, "sh", "-c", command],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return done.stdout


@pytest.mark.parametrize("where", ["loopback", "host address"])
def test_add_of_a_url_on_the_host_is_refused_and_nothing_is_fetched(
    tmp_path: Path, secret_server: tuple[int, list[str]], images: list[str], where: str
) -> None:
    port, asked = secret_server
    address = "127.0.0.1" if where == "loopback" else host_addresses()[0]
    url = f"http://{address}:{port}/secret.txt"

    outcome = build(tmp_path, "add", f"FROM debian:bookworm-slim\nADD {url} /secret.txt\n", images)

    assert outcome.status == "failed"
    assert outcome.reason == (
        f"ADD {url}: a build fetches nothing by URL here (the builder would fetch it on the host's own "
        "network); put the file in the build context"
    )
    assert asked == []


def test_add_through_a_variable_is_refused_too(
    tmp_path: Path, secret_server: tuple[int, list[str]], images: list[str]
) -> None:
    port, asked = secret_server
    dockerfile = (
        f"FROM debian:bookworm-slim\nARG WHERE=http://127.0.0.1:{port}/secret.txt\nADD $WHERE /secret.txt\n"
    )

    outcome = build(tmp_path, "add", dockerfile, images)

    assert outcome.status == "failed" and outcome.reason is not None
    assert outcome.reason.startswith("ADD $WHERE: a build fetches nothing by URL here")
    assert asked == []


def test_run_steps_of_a_build_on_the_default_network_reach_nothing_of_the_host(
    tmp_path: Path, secret_server: tuple[int, list[str]], images: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The operator's choice unset: a daemon without a bridge (as here) builds on `none`.
    monkeypatch.delenv("ENVLOOP_DOCKER_BUILD_NETWORK", raising=False)
    port, asked = secret_server
    read = "import sys, urllib.request as u; print(u.urlopen(sys.argv[1], timeout=5).read())"
    fetch = "; ".join(
        f"python3 -c '{read}' http://{address}:{port}/s >> /got 2>/dev/null"
        for address in ("127.0.0.1", *host_addresses())
    )

    outcome = build(
        tmp_path,
        "run",
        f"FROM python:3.11-slim\nRUN echo {secrets.token_hex(8)}; touch /got; {fetch}; true\n",
        images,
        network=None,
    )

    assert outcome.status == "built", outcome.reason
    assert asked == [] and SECRET not in run_in(outcome.image, "cat /got")


def test_two_tasks_naming_the_same_cache_mount_do_not_share_it(tmp_path: Path, images: list[str]) -> None:
    # Fresh steps each run: a layer cached from an earlier run would not run its step again.
    fresh = f"FROM debian:bookworm-slim\nRUN echo {secrets.token_hex(8)}\n"
    cache = "RUN --mount=type=cache,id=shared,target=/root/.cache/pip"
    poison = build(
        tmp_path,
        "poisoner",
        f"{fresh}{cache} echo poisoned > /root/.cache/pip/wheel\n",
        images,
    )
    victim = build(
        tmp_path,
        "victim",
        f"{fresh}{cache} cat /root/.cache/pip/wheel > /seen 2>/dev/null; touch /seen\n",
        images,
    )
    # Without an id the target path is the id: the same for every task that names it.
    implicit = "RUN --mount=type=cache,target=/var/cache/apt"
    first = build(tmp_path, "first", f"{fresh}{implicit} echo first > /var/cache/apt/x\n", images)
    second = build(
        tmp_path,
        "second",
        f"{fresh}{implicit} cat /var/cache/apt/x > /seen 2>/dev/null; touch /seen\n",
        images,
    )

    assert [o.status for o in (poison, victim, first, second)] == ["built"] * 4, [
        o.reason for o in (poison, victim, first, second)
    ]
    assert run_in(victim.image, "cat /seen") == ""
    assert run_in(second.image, "cat /seen") == ""


def test_a_task_cannot_build_on_copy_from_or_tag_another_tasks_image(
    tmp_path: Path, images: list[str]
) -> None:
    hidden = build(
        tmp_path, "hidden", f"FROM debian:bookworm-slim\nRUN echo {SECRET} > /hidden-test\n", images
    )
    assert hidden.status == "built", hidden.reason
    other = hidden.image

    based = build(tmp_path, "based", f"FROM {other}\nRUN cat /hidden-test\n", images)
    copied = build(
        tmp_path, "copied", f"FROM debian:bookworm-slim\nCOPY --from={other} /hidden-test /x\n", images
    )
    mounted = build(
        tmp_path,
        "mounted",
        f"FROM debian:bookworm-slim\nRUN --mount=type=bind,from={other},target=/o cp /o/hidden-test /x\n",
        images,
    )
    staged = build(
        tmp_path,
        "staged",
        f"FROM debian:bookworm-slim\nARG SOURCE={other}\nCOPY --from=$SOURCE /hidden-test /x\n",
        images,
    )
    tagged = build(
        tmp_path, "tagged", "FROM debian:bookworm-slim\n", images, BuildSettings(docker_image=other)
    )

    refusal = "another task's image (a task builds on and runs base images and its own alone)"
    assert (based.status, based.reason) == ("failed", f"FROM {other}: {refusal}")
    assert (copied.status, copied.reason) == ("failed", f"COPY --from {other}: {refusal}")
    assert (mounted.status, mounted.reason) == ("failed", f"RUN --mount from {other}: {refusal}")
    assert (staged.status, staged.reason) == ("failed", f"COPY --from {other}: {refusal}")
    assert (tagged.status, tagged.reason) == ("failed", f"docker_image {other}: {refusal}")


def test_another_tasks_image_named_by_its_id_or_a_prefix_of_it_is_refused_too(
    tmp_path: Path, images: list[str]
) -> None:
    """The daemon resolves an image ID, its `sha256:` form and any unique prefix of it as it
    resolves a tag: a build naming another task's image so is refused before it runs."""
    hidden = build(
        tmp_path, "hidden", f"FROM debian:bookworm-slim\nRUN echo {SECRET} > /hidden-test-by-id\n", images
    )
    assert hidden.status == "built" and hidden.image_id, hidden.reason
    full = hidden.image_id
    short = full.removeprefix("sha256:")[:12]
    refusal = "another task's image (a task builds on and runs base images and its own alone)"
    for name, reference, line in [
        ("by-id", full, f"COPY --from={full} /hidden-test-by-id /x"),
        ("by-prefix", short, f"COPY --from={short} /hidden-test-by-id /x"),
        ("from-prefix", short, f"FROM {short} AS peek"),
    ]:
        outcome = build(tmp_path, name, f"FROM debian:bookworm-slim\n{line}\n", images)
        assert outcome.status == "failed" and outcome.reason is not None, outcome
        # Named by its ID, another task's image is no image this machine offers a task at all.
        assert outcome.reason.split(": ")[0].endswith(f" {reference}"), outcome.reason
        assert refusal in outcome.reason or "not available on this machine" in outcome.reason


def test_a_sidecar_cannot_run_another_tasks_image(tmp_path: Path, images: list[str]) -> None:
    hidden = build(
        tmp_path, "hidden", f"FROM debian:bookworm-slim\nRUN echo {SECRET} > /hidden-test\n", images
    )
    assert hidden.status == "built", hidden.reason
    task = tmp_path / "task"
    for sub in ("tests", "solution", "environment"):
        (task / sub).mkdir(parents=True)
    (task / "task.toml").write_text('version = "1.0"\n')
    (task / "instruction.md").write_text("Read the other task's tests.\n")
    (task / "environment" / "Dockerfile").write_text(
        f"FROM debian:bookworm-slim\nLABEL t={secrets.token_hex(8)}\n"
    )
    (task / "environment" / "docker-compose.yaml").write_text(
        f"services:\n  main: {{}}\n  peek:\n    image: {hidden.image}\n    command: sleep 600\n"
    )
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    spec = TrialSpec(
        job_id="job_build_reach",
        trial_id=new_id("trl"),
        task_name="task",
        attempt=1,
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params={"AGENT_NAME": "command", "AGENT_COMMAND": "true"},
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
    )
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    outcome = asyncio.run(ShellRunner(provider).run(spec))

    assert outcome.reward is None and outcome.error is not None
    assert f"sidecar 'peek': image {hidden.image}: another task's image" in outcome.error.message


def test_a_job_with_a_task_that_adds_a_url_is_refused_at_submission_in_one_line(
    el: El, tmp_path: Path, secret_server: tuple[int, list[str]]
) -> None:
    port, asked = secret_server
    task = make_task(tmp_path / "tasks", "fetcher")
    url = f"http://127.0.0.1:{port}/secret.txt"
    (task / "environment" / "Dockerfile").write_text(f"FROM debian:bookworm-slim\nADD {url} /secret.txt\n")
    el.ok("dataset", "push", str(tmp_path / "tasks"), "--name", "fetch")
    profile = write_profile(tmp_path / "p.json", {"AGENT_NAME": "oracle"})
    el.ok("profile", "create", "team/oracle", "1", "--file", str(profile))

    refused = el(
        "job", "submit", "--dataset", "fetch@1", "--profile", "team/oracle@1", "--environment", "docker"
    )

    assert (refused.code, refused.stderr) == (
        2,
        f"el: error: 1 task(s) cannot be built here: fetcher (ADD {url}: a build fetches nothing by URL "
        "here (the builder would fetch it on the host's own network); put the file in the build context) "
        "(pass --skip-unsupported to run the other tasks)\n",
    )
    assert asked == []


STAGES = 4


def chatty_stages(nonce: str) -> str:
    """Stages that each write 0.9 MB, under BuildKit's rate limit (`nonce` keeps its cache out)."""
    return "".join(
        f"FROM {DEBIAN_IMAGE} AS chatty{stage}\n"
        f"RUN echo {nonce}; for i in $(seq 1 6); do head -c 150000 /dev/zero | tr '\\\\0' x; sleep 1; done\n"
        for stage in range(STAGES)
    )


def test_a_build_log_is_bounded_while_it_is_written(
    tmp_path: Path, images: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """BuildKit clips one step's output at 2 MiB; a Dockerfile of many stages has many steps, and
    their output together went to the host's disk whole. Here four stages write 0.9 MB each, with
    the build log's bound set at 128 KiB a side: the log stays within it, says what it dropped,
    and the failed step is still named from its tail."""
    monkeypatch.setattr(builder, "BUILD_LOG_HEAD_BYTES", 128 << 10)
    monkeypatch.setattr(builder, "BUILD_LOG_TAIL_BYTES", 128 << 10)
    copies = "".join(f"COPY --from=chatty{stage} /etc/hostname /stage{stage}\n" for stage in range(STAGES))
    last = f"FROM {DEBIAN_IMAGE}\n{copies}RUN echo the last step && exit 7\n"
    dockerfile = chatty_stages(secrets.token_hex(8)) + last
    outcome = build(tmp_path, "chatty", dockerfile, images)
    assert outcome.status == "failed", outcome
    assert outcome.reason is not None and "RUN echo the last step && exit 7 failed" in outcome.reason, outcome
    (log,) = (tmp_path / "builds").glob("*.log")
    kept = log.read_bytes()
    assert len(kept) < (256 << 10) + 4096, len(kept)
    assert b"bytes of this output were dropped here]" in kept
