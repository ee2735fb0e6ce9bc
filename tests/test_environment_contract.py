"""The Environment contract, attacked the same way in every provider: files cross the boundary only
by the paths a command sees, never through a link a command planted, with secrets masked on the way
out; snapshots see what commands changed. The local provider runs in bwrap; the docker provider in a
container of a task image built once for this module."""

import asyncio
import contextlib
import secrets
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.trial import TrialSpec
from envloop.environments import (
    Environment,
    EnvironmentProvider,
    EnvironmentSetupError,
    LocalEnvironmentProvider,
)
from envloop.environments.docker.cli import DockerError, docker_binary
from envloop.environments.docker.images import BuildRecords, task_image
from envloop.environments.docker.provider import DockerEnvironmentProvider
from envloop.environments.local.bwrap import bwrap_executable
from envloop.tasks.harbor import load_harbor_task
from envloop.tasks.model import HarborTask
from envloop.trajectories import changes_between
from tests.docker_daemon import docker_daemon

__all__ = ["docker_daemon"]

SECRET = "sk-contract-" + secrets.token_hex(8)
needs_bwrap = pytest.mark.skipif(bwrap_executable()[0] is None, reason="bwrap cannot create a sandbox here")
PROVIDERS = [
    pytest.param("local", marks=needs_bwrap),
    pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.slow]),
]


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HarborTask]:
    root = tmp_path_factory.mktemp("contract") / "task"
    for sub in ("tests", "solution", "environment"):
        (root / sub).mkdir(parents=True)
    (root / "task.toml").write_text('version = "1.0"\n')
    (root / "instruction.md").write_text("Nothing to do.\n")
    (root / "tests" / "test.sh").write_text("echo verifier\n")
    (root / "environment" / "Dockerfile").write_text(
        f"FROM debian:12\nWORKDIR /app\nLABEL token={secrets.token_hex(8)}\n"
    )
    loaded = load_harbor_task(root)
    yield loaded
    with contextlib.suppress(DockerError, OSError):  # a machine without docker built nothing
        subprocess.run(
            [docker_binary(), "rmi", "--force", task_image(loaded.digest)], capture_output=True, check=False
        )


def provider_for(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> EnvironmentProvider:
    if kind == "local":
        return LocalEnvironmentProvider("bwrap")
    request.getfixturevalue("docker_daemon")
    return DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))


def run_in(
    kind: str,
    task: HarborTask,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    body: Callable[[Environment], Awaitable[None]],
) -> None:
    spec = TrialSpec(
        job_id="job_contract",
        trial_id=new_id("trl"),
        task_name=task.name,
        attempt=1,
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params={},
        secret_values=(SECRET,),
        task_dir=task.root,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
    )
    provider = provider_for(kind, tmp_path, request)

    async def main() -> None:
        async with provider.instance(task, spec) as env:
            await body(env)

    asyncio.run(main())


@pytest.mark.parametrize("kind", PROVIDERS)
def test_write_file_replaces_a_planted_link_instead_of_writing_through_it(
    kind: str, task: HarborTask, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("host file\n")

    async def body(env: Environment) -> None:
        target = f"{env.visible.tmp}/instruction.md"
        planted = await env.exec(
            ["sh", "-c", f'echo inside > /tmp/own && ln -s "$1" {target}', "x", str(victim)]
        )
        assert planted.exit_code == 0, planted.stderr
        await env.write_file(target, b"the instruction\n")
        seen = await env.exec(["sh", "-c", f"cat {target}; test -L {target} && echo STILL-A-LINK"])
        assert seen.stdout == "the instruction\n"

    run_in(kind, task, tmp_path, request, body)
    assert victim.read_text() == "host file\n"


@pytest.mark.parametrize("kind", PROVIDERS)
def test_read_file_never_follows_a_link_and_says_when_there_is_no_file(
    kind: str, task: HarborTask, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    host_secret = tmp_path / "host-secret.txt"
    host_secret.write_text("host secret\n")

    async def body(env: Environment) -> None:
        logs = env.visible.agent_logs
        await env.exec(
            ["sh", "-c", f'ln -s "$1" {logs}/reward.txt; echo 0.5 > {logs}/plain.txt', "x", str(host_secret)]
        )
        assert await env.read_file(f"{logs}/plain.txt", 1024) == b"0.5\n"
        assert await env.read_file(f"{logs}/absent.txt", 1024) is None
        with pytest.raises(OSError):
            await env.read_file(f"{logs}/reward.txt", 1024)

    run_in(kind, task, tmp_path, request, body)


@pytest.mark.parametrize("kind", PROVIDERS)
def test_get_dir_keeps_regular_files_only_with_secrets_masked(
    kind: str, task: HarborTask, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    target = tmp_path / "kept"

    async def body(env: Environment) -> None:
        logs = env.visible.agent_logs
        script = (
            f"mkdir -p {logs}/sub && echo key=$1 > {logs}/sub/a.txt && ln -s /etc/passwd {logs}/passwd && "
            f"ln -s / {logs}/root && mkfifo {logs}/pipe"
        )
        made = await env.exec(["sh", "-c", script, "x", SECRET])
        assert made.exit_code == 0, made.stderr
        await env.stop()
        await env.get_dir(logs, target)
        assert await env.get_dir(f"{env.visible.logs}/nothing-here", tmp_path / "none") == []

    run_in(kind, task, tmp_path, request, body)
    assert (target / "sub" / "a.txt").read_text() == "key=***\n"
    assert sorted(p.name for p in target.iterdir()) == ["sub"]
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("kind", PROVIDERS)
def test_snapshots_see_created_modified_and_deleted_files_and_record_links_as_links(
    kind: str, task: HarborTask, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async def body(env: Environment) -> None:
        await env.exec(["sh", "-c", "echo one > keep.txt && echo gone > old.txt"])
        before = await env.snapshot()
        await env.exec(
            [
                "sh",
                "-c",
                "echo two >> keep.txt && rm old.txt && mkdir -p d && echo new > d/new.txt && "
                "ln -s /etc/passwd link",
            ]
        )
        after = await env.snapshot(before)
        changes = {c.path: c for c in changes_between(before, after)}
        assert {path: c.change for path, c in changes.items()} == {
            "d/new.txt": "created",
            "keep.txt": "modified",
            "link": "created",
            "old.txt": "deleted",
        }
        assert "+two" in (changes["keep.txt"].diff or "")
        assert after["link"].digest == "link:/etc/passwd"
        again = await env.snapshot(after)
        assert {path: state.digest for path, state in again.items()} == {
            path: state.digest for path, state in after.items()
        }

    run_in(kind, task, tmp_path, request, body)


@pytest.mark.parametrize("kind", PROVIDERS)
def test_commands_start_where_asked_and_paths_outside_the_instance_are_refused(
    kind: str, task: HarborTask, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async def body(env: Environment) -> None:
        assert (await env.exec(["pwd"])).stdout.strip() == env.visible.app
        assert (await env.exec(["pwd"], cwd=env.visible.tmp)).stdout.strip() == env.visible.tmp
        if kind == "local":
            # Copying out while commands may run could follow a directory swapped for a link.
            with pytest.raises(EnvironmentSetupError):
                await env.get_dir(env.visible.agent_logs, tmp_path / "early")
            for outside in (
                "/etc/passwd",
                f"{env.visible.tmp}/../etc/passwd",
                "relative.txt",
                f"{env.visible.app}le/x.txt",  # a sibling whose name starts with the directory's
            ):
                with pytest.raises(EnvironmentSetupError):
                    await env.read_file(outside, 1024)
            # A path given untidily still lands where it names, below the instance's directory.
            await env.write_file(f"{env.visible.app}//sub/./deeper/../x.txt", b"deep")
            assert (await env.exec(["cat", "sub/x.txt"])).stdout == "deep"
            assert await env.read_file(f"{env.visible.app}/sub/x.txt/", 1024) == b"deep"

    run_in(kind, task, tmp_path, request, body)
