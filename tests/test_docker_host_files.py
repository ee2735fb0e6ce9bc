"""Copies into and out of a running container made by the host through the container's own
filesystem (host_files.py), attacked the way an agent running as root inside would: links planted
where the worker reads or writes, device nodes and FIFOs, a volume the host's view does not show.
Each result must be the one the Engine API's archive copy gives, and nothing of the host may be
read or written."""

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest

from envloop.environments.docker.base_images import DEBIAN_IMAGE
from envloop.environments.docker.cli import docker_binary
from envloop.environments.docker.container_spec import ContainerSpec
from envloop.environments.docker.containers import Container, running_container
from envloop.environments.docker.host_files import HostFiles
from envloop.environments.docker.transfer import Owner
from envloop.environments.docker.workspace import ContainerSnapshots
from tests.docker_daemon import docker_daemon

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon"]

WAYS = ["host", "api"]


def _spec(trial: str, image: str = DEBIAN_IMAGE) -> ContainerSpec:
    return ContainerSpec(image=image, trial_id=trial, workdir="/app")


async def _no_host_files() -> None:
    return None


def _force(container: Container, way: str) -> None:
    if way == "api":
        container.host_files = _no_host_files  # type: ignore[method-assign]


async def _sh(container: Container, script: str) -> str:
    done = await container.exec(["sh", "-c", script], user="0")
    assert done.exit_code == 0, done.stderr
    return done.stdout


def _listing(root: Path) -> dict[str, str]:
    return {
        path.relative_to(root).as_posix(): ("dir" if path.is_dir() else path.read_text())
        for path in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize("way", WAYS)
def test_both_ways_copy_in_and_out_alike(way: str, tmp_path: Path) -> None:
    """Owners, modes and links as links going in (over what was there: directories merge, the rest
    is replaced); only directories and regular files coming out, with one note per entry left out."""
    source = tmp_path / "tests"
    (source / "sub").mkdir(parents=True)
    (source / "test.sh").write_text("#!/bin/sh\necho ok\n")
    (source / "test.sh").chmod(0o700)
    (source / "sub" / "data.txt").write_text("data\n")
    (source / "link").symlink_to("/etc/shadow")
    out = tmp_path / "out"

    async def go() -> tuple[str, bytes, list[str], str | None]:
        async with running_container(_spec(f"trl_both_{way}")) as container:
            _force(container, way)
            await _sh(container, "mkdir -p /tests/old && echo old > /tests/sub && echo keep > /tests/old/k")
            await container.put_dir(source, "/tests", owner=Owner(uid=1234, gid=1234), readable=True)
            await container.put_file("/tmp/deep/er/note.txt", b"note\n", mode=0o640)
            await container.make_directories([("/logs/agent", 0o1777), ("/logs/verifier", 0o755)])
            await container.reset(["/tests/old"], [("/scratch", 0o777)])
            listing = await _sh(
                container,
                "cd / && stat -c '%u:%g %a %F %n' tests tests/test.sh tests/sub tests/sub/data.txt "
                "tests/link tmp/deep tmp/deep/er/note.txt logs/agent logs/verifier scratch; "
                "readlink tests/link; test -e tests/old || echo no-old",
            )
            await _sh(
                container,
                "cd /logs/verifier && echo 1 > reward.txt && mkdir -p d/e && echo x > d/e/f && "
                "ln -s /etc/passwd pw && mkfifo fifo && mknod null c 1 3",
            )
            report = await container.get_dir("/logs", out)
            kind = await container.path_kind("/logs/verifier/pw")
            return listing, await container.read_file("/logs/verifier/reward.txt"), report.skipped, kind

    listing, reward, skipped, kind = asyncio.run(go())

    assert listing.splitlines() == [
        "1234:1234 755 directory tests",
        "1234:1234 744 regular file tests/test.sh",
        "1234:1234 755 directory tests/sub",
        "1234:1234 644 regular file tests/sub/data.txt",
        "1234:1234 777 symbolic link tests/link",
        "0:0 755 directory tmp/deep",
        "0:0 640 regular file tmp/deep/er/note.txt",
        "0:0 1777 directory logs/agent",
        "0:0 755 directory logs/verifier",
        "0:0 777 directory scratch",
        "/etc/shadow",
        "no-old",
    ]
    assert reward == b"1\n"
    assert kind == "other"
    assert _listing(out) == {
        "agent": "dir",
        "verifier": "dir",
        "verifier/d": "dir",
        "verifier/d/e": "dir",
        "verifier/d/e/f": "x\n",
        "verifier/reward.txt": "1\n",
    }
    assert sorted(skipped) == [
        "verifier/fifo: FIFO not kept",
        "verifier/null: device file not kept",
        "verifier/pw: symlink to /etc/passwd not kept",
    ]


@pytest.mark.parametrize("way", WAYS)
def test_a_reward_planted_as_a_link_a_fifo_or_a_device_is_never_read_through(way: str) -> None:
    """A reward file that is a link to the host's /etc/hostname (read on the host, it would be the
    host's), a FIFO (a read would wait forever) or the host's null device is refused, at once."""
    plants = {
        "link": "ln -s /etc/hostname /logs/verifier/reward.txt",
        "fifo": "mkfifo /logs/verifier/reward.txt",
        "device": "mknod /logs/verifier/reward.txt c 1 3",
    }

    async def go() -> dict[str, str]:
        found = {}
        async with running_container(_spec(f"trl_plant_{way}")) as container:
            _force(container, way)
            for name, plant in plants.items():
                await _sh(container, f"rm -rf /logs && mkdir -p /logs/verifier && {plant}")
                try:
                    data = await asyncio.wait_for(container.read_file("/logs/verifier/reward.txt"), 30)
                    found[name] = data.decode()
                except IsADirectoryError:
                    found[name] = "refused"
        return found

    assert asyncio.run(go()) == {"link": "refused", "fifo": "refused", "device": "refused"}


def test_a_directory_planted_as_a_link_to_the_hosts_files_is_resolved_inside_never_on_the_host(
    tmp_path: Path,
) -> None:
    """`/logs` a link to a host directory's path: on the host that path is the host's, so each
    copy goes through the API, which resolves the link inside the container, where the path
    holds the container's files. The host directory is neither read nor written."""
    host_dir = tmp_path / "host-secrets"
    host_dir.mkdir()
    (host_dir / "reward.txt").write_text("host secret\n")
    out = tmp_path / "out"

    async def go() -> tuple[bytes, str, list[str]]:
        async with running_container(_spec("trl_plant_dir")) as container:
            files = await container.host_files()
            assert files is not None, "the worker runs as root beside the daemon here"
            await _sh(
                container,
                f"rm -rf /logs && mkdir -p '{host_dir}' && echo inside > '{host_dir}/reward.txt' && "
                f"ln -s '{host_dir}' /logs",
            )
            reward = await container.read_file("/logs/reward.txt")
            await container.put_file("/logs/written.txt", b"from the worker\n")
            await container.make_directories([("/logs/made", 0o755)])
            inside = await _sh(container, f"cat '{host_dir}/written.txt'; ls '{host_dir}'")
            report = await container.get_dir("/logs", out)
            return reward, inside, report.skipped

    reward, inside, skipped = asyncio.run(go())

    assert reward == b"inside\n"
    assert inside == "from the worker\nmade\nreward.txt\nwritten.txt\n"
    assert sorted(p.name for p in host_dir.iterdir()) == ["reward.txt"]
    assert (host_dir / "reward.txt").read_text() == "host secret\n"
    assert skipped == [] and list(out.iterdir()) == []  # the link itself is what `/logs` is


def test_a_link_swapped_in_below_a_tree_being_copied_out_is_never_followed(tmp_path: Path) -> None:
    """A tree whose subdirectory is a link to `/` (the host's root, seen from the host): the copy
    keeps the container's files and lists the link, and nothing of the host comes out."""
    out = tmp_path / "out"

    async def go() -> list[str]:
        async with running_container(_spec("trl_swap")) as container:
            await _sh(container, "mkdir -p /logs/agent && echo mine > /logs/agent/mine")
            await _sh(container, "ln -s / /logs/agent/root")
            return (await container.get_dir("/logs/agent", out)).skipped

    skipped = asyncio.run(go())

    assert _listing(out) == {"mine": "mine\n"}
    assert skipped == ["root: symlink to / not kept"]


def test_a_volume_the_hosts_view_does_not_show_is_copied_through_the_api(tmp_path: Path) -> None:
    """An image's VOLUME is a mount of the container's own: written on the host's view of the
    container it would land under the mount, unseen inside; it goes through the API instead."""
    image = "envloop-test-volume:1"
    subprocess.run(
        [docker_binary(), "build", "-q", "-t", image, "-"],
        input=f"FROM {DEBIAN_IMAGE}\nVOLUME /data\n".encode(),
        check=True,
        capture_output=True,
    )

    async def go() -> tuple[bool, str, bytes, list[str]]:
        async with running_container(_spec("trl_volume", image)) as container:
            files = await container.host_files()
            covered = files is not None and files.covers("/data/x")
            await container.put_file("/data/x", b"in the volume\n")
            inside = await _sh(container, "cat /data/x")
            await _sh(container, "echo from-inside > /data/y")
            snapshot = await ContainerSnapshots(container, "/data").take()
            return covered, inside, await container.read_file("/data/y"), sorted(snapshot)

    try:
        covered, inside, read, snapshotted = asyncio.run(go())
    finally:
        subprocess.run([docker_binary(), "rmi", "-f", image], capture_output=True, check=False)

    assert not covered
    assert inside == "in the volume\n"
    assert read == b"from-inside\n"
    assert snapshotted == ["x", "y"], "a working directory on a volume is snapshotted from inside"


def test_paths_the_runtime_mounts_are_never_taken_from_the_hosts_view() -> None:
    files = HostFiles(Path("/nonexistent"), ("/data",))
    assert not files.covers("/etc/hosts") and not files.covers("/proc/1/environ")
    assert not files.covers("/") and not files.covers("/data/sub") and not files.covers("/dev/sda")
    assert files.covers("/logs/verifier") and files.covers("/etc/hostname.d") and files.covers("/datasets")


def test_host_files_exist_only_for_a_running_container() -> None:
    async def go() -> list[Any]:
        async with running_container(_spec("trl_running")) as container:
            running = await container.host_files()
            subprocess.run([docker_binary(), "kill", container.id], capture_output=True, check=True)
            return [running, await container.host_files()]

    running, stopped = asyncio.run(go())

    assert running is not None and stopped is None
