"""The Docker environment's output channels, attacked on a real daemon: a command's stdout and
stderr through exec are bounded while they are written, the container's own log (reachable by any
process inside through `/proc/1/fd/1`) is capped by the daemon, and no fallback runs a program of
the container's (which a root agent may have replaced) or reads its output unbounded: a snapshot
reads the daemon's archive within a bound, directories are prepared and made from the host or
through the daemon."""

import asyncio
import json
import resource
import subprocess
import time
from pathlib import Path

import pytest

from envloop.environments.docker.base_images import DEBIAN_IMAGE
from envloop.environments.docker.cli import docker_binary
from envloop.environments.docker.container_spec import ContainerSpec
from envloop.environments.docker.containers import Container, running_container
from envloop.environments.docker.workspace import ContainerSnapshots
from envloop.environments.keeping import MAX_KEPT_FILE_BYTES
from envloop.trajectories.workspace import Snapshot
from tests.docker_daemon import docker_daemon

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon"]

NOTE = b"bytes of this output were dropped here]"


def _spec(trial: str) -> ContainerSpec:
    """As most tasks run their agent: as the image's user, root."""
    return ContainerSpec(image=DEBIAN_IMAGE, trial_id=trial)


def test_endless_exec_output_is_bounded_while_it_is_written(tmp_path: Path) -> None:
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    sizes: list[int] = []

    async def watch() -> None:
        while True:
            if out.exists():
                sizes.append(out.stat().st_size)
            await asyncio.sleep(0.01)

    async def go() -> tuple[bool, str]:
        async with running_container(_spec("trl_bounded_exec")) as container:
            watcher = asyncio.create_task(watch())
            try:
                endless = await container.exec(
                    ["sh", "-c", "echo FIRST; cat /dev/zero"], stdout=out, timeout=5
                )
            finally:
                watcher.cancel()
            flood = await container.exec(
                ["sh", "-c", "head -c 100000000 /dev/zero >&2; echo LAST >&2"], stderr=err, timeout=120
            )
            return endless.timed_out, flood.stderr

    timed_out, flood_tail = asyncio.run(go())
    assert timed_out and max(sizes) <= MAX_KEPT_FILE_BYTES
    data = out.read_bytes()
    assert data.startswith(b"FIRST\n\0") and NOTE in data and len(data) <= MAX_KEPT_FILE_BYTES
    flood = err.read_bytes()
    assert flood.endswith(b"\0LAST\n") and NOTE in flood and len(flood) <= MAX_KEPT_FILE_BYTES
    assert flood_tail.endswith("LAST\n")


def test_the_containers_own_log_is_capped_by_the_daemon() -> None:
    """`cat /dev/zero > /proc/1/fd/1` by an agent running as root writes to the daemon's log of the
    container: it keeps at most one small file of it, whatever the daemon's default driver."""

    async def go() -> dict[str, object]:
        async with running_container(_spec("trl_bounded_log")) as container:
            wrote = await container.exec(
                ["sh", "-c", "head -c 60000000 /dev/zero > /proc/1/fd/1"], timeout=120
            )
            assert wrote.exit_code == 0, wrote.stderr
            await asyncio.sleep(0.5)
            done = subprocess.run(
                [docker_binary(), "inspect", container.id], capture_output=True, text=True, check=True
            )
            return json.loads(done.stdout)[0]  # type: ignore[no-any-return]

    inspected = asyncio.run(go())
    config = inspected["HostConfig"]["LogConfig"]  # type: ignore[index]
    assert config == {"Type": "json-file", "Config": {"max-file": "1", "max-size": "1m"}}
    log = Path(str(inspected["LogPath"]))
    if log.parent.is_dir():  # a daemon on this host: its log file is there to measure
        kept = sum(path.stat().st_size for path in log.parent.glob(f"{log.name}*"))
        assert 100_000 < kept <= 2 << 20


def test_a_snapshot_runs_no_program_of_the_agents_and_reads_a_bounded_archive() -> None:
    """The agent replaces `find`, `tar` and `sha256sum` by endless writers and makes the working
    directory a link (which the worker must not follow from the host): the snapshot still records
    the files as they are, from the daemon's archive, and a gigabyte file in it is cut off at the
    archive's bound, the trial told once, the worker's memory untouched."""
    plant = (
        "mkdir -p /srv/work && echo kept > /srv/work/kept.txt && ln -s /srv/work /app && "
        "for tool in find tar sha256sum xargs; do "
        'printf "#!/bin/sh\\nexec cat /dev/zero\\n" > "/usr/bin/$tool"; chmod 755 "/usr/bin/$tool"; done'
    )

    async def go() -> tuple[Snapshot, str | None, Snapshot, str | None, float]:
        async with running_container(_spec("trl_bounded_snapshot")) as container:
            await container.exec(["sh", "-c", plant])
            snapshots = ContainerSnapshots(container, "/app")
            small = await snapshots.take()
            first_problem = snapshots.problem
            await container.exec(["sh", "-c", "head -c 400000000 /dev/zero > /srv/work/huge.bin"])
            started = time.monotonic()
            large = await snapshots.take(small)
            return small, first_problem, large, snapshots.problem, time.monotonic() - started

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    small, first_problem, large, problem, seconds = asyncio.run(go())
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024

    assert set(small) == {"kept.txt"} and small["kept.txt"].text == "kept\n" and first_problem is None
    assert large["kept.txt"] == small["kept.txt"]
    assert "huge.bin" not in large or large["huge.bin"].size == 400_000_000
    assert problem is not None and "recorded in part" in problem
    assert seconds < 60 and grown_mb < 200


_REPLACE_TOOLS = (
    "for tool in rm mkdir chmod sh; do "
    'printf "#!/bin/dash\\ntouch /envloop-ran-$tool\\n" > /tmp/fake-$tool; chmod 755 /tmp/fake-$tool; done; '
    "for tool in rm mkdir chmod sh; do mv /tmp/fake-$tool /usr/bin/$tool; done"
)
"""As root inside: `rm`, `mkdir`, `chmod` and `sh` replaced by programs that only leave a mark."""


def test_a_directory_reached_through_a_planted_link_is_prepared_without_the_agents_programs() -> None:
    """The agent makes `/logs` a link to a directory holding a forged reward and replaces `rm`,
    `mkdir`, `chmod` and `sh`: the verifier's directory is still emptied (through the link, as the
    container resolves it) and none of the agent's programs ran."""
    plant = (
        "mkdir -p /srv/forged/verifier && echo 1 > /srv/forged/verifier/reward.txt && rm -rf /logs && "
        f"ln -s /srv/forged /logs && {_REPLACE_TOOLS}"
    )

    async def go() -> tuple[str, str]:
        async with running_container(_spec("trl_prepare_link")) as container:
            await container.exec(["dash", "-c", plant])
            await container.reset(["/logs/verifier"], [("/logs/verifier", 0o777)])
            left = await container.exec(["ls", "-A", "/srv/forged/verifier"])
            marks = await container.exec(["ls", "/"])
            return left.stdout, marks.stdout

    left, marks = asyncio.run(go())

    assert left == "" and "envloop-ran" not in marks


def test_a_missing_parent_is_made_through_the_daemon_without_the_agents_programs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the worker cannot see the container's files, a copy into a missing directory makes it
    by an archive of directories, not by the image's `mkdir` (replaced here), and leaves the modes
    of directories that were there (`/tmp`) as they were."""

    async def unseen(self: Container) -> None:
        return None

    monkeypatch.setattr(Container, "host_root", unseen)

    async def go() -> tuple[str, str, str]:
        async with running_container(_spec("trl_prepare_parent")) as container:
            await container.exec(["dash", "-c", _REPLACE_TOOLS])
            await container.put_file("/tmp/new/deeper/file.txt", b"delivered")
            content = await container.exec(["cat", "/tmp/new/deeper/file.txt"])
            modes = await container.exec(["stat", "-c", "%a", "/tmp", "/tmp/new"])
            marks = await container.exec(["ls", "/"])
            return content.stdout, modes.stdout, marks.stdout

    content, modes, marks = asyncio.run(go())

    assert content == "delivered" and modes.split() == ["1777", "755"] and "envloop-ran" not in marks


def test_an_agent_phase_writing_without_end_keeps_a_bounded_log_and_its_zero(tmp_path: Path) -> None:
    """The whole trial: the agent's command is `timeout 5 cat /dev/zero`, the verifier writes 0. The
    trial keeps its reward, says how much of the agent's output was dropped, and what it keeps of
    that output is at most a trial's bound for one file."""
    from envloop.environments.docker.images import BuildRecords  # noqa: PLC0415
    from envloop.environments.docker.provider import DockerEnvironmentProvider  # noqa: PLC0415
    from envloop.runners import ShellRunner  # noqa: PLC0415
    from tests.test_verdict_tampering import hostile_spec  # noqa: PLC0415

    verifier = "#!/bin/sh\necho 0 > /logs/verifier/reward.txt\n"
    spec = hostile_spec(
        tmp_path, "timeout 5 cat /dev/zero; echo LAST", verifier, dockerfile=f"FROM {DEBIAN_IMAGE}\n"
    )
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    outcome = asyncio.run(ShellRunner(provider).run(spec))

    assert outcome.error is None, outcome.error
    assert outcome.reward == 0.0
    assert any("of its stdout were dropped from the middle" in line for line in outcome.warnings)
    kept = [path for path in (tmp_path / "artifacts").rglob("stdout.txt") if "agent" in path.parts]
    assert kept, sorted(str(p) for p in (tmp_path / "artifacts").rglob("*"))
    data = kept[0].read_bytes()
    assert len(data) <= MAX_KEPT_FILE_BYTES and NOTE in data and data.endswith(b"\0LAST\n")
    total = sum(path.stat().st_size for path in tmp_path.rglob("*") if path.is_file())
    assert total < 3 * MAX_KEPT_FILE_BYTES


def test_a_command_past_its_timeout_is_killed_without_the_agents_shell() -> None:
    """`sh` replaced by a program that only leaves a mark: a command past its timeout (and what it
    started) is still killed, from the host, and the agent's `sh` never ran."""
    replace_sh = (
        'printf "#!/bin/dash\\ntouch /envloop-ran-sh\\n" > /tmp/fake-sh; chmod 755 /tmp/fake-sh; '
        "mv /tmp/fake-sh /usr/bin/sh"
    )

    async def go() -> tuple[bool, str, str]:
        async with running_container(_spec("trl_kill_without_sh")) as container:
            await container.exec(["dash", "-c", replace_sh])
            started = time.monotonic()
            slow = await container.exec(["dash", "-c", "sleep 300 & sleep 301; echo never"], timeout=1)
            assert time.monotonic() - started < 20
            left = await container.exec(
                ["dash", "-c", 'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < $f; echo; done']
            )
            marks = await container.exec(["ls", "/"])
            return slow.timed_out, left.stdout, marks.stdout

    timed_out, left, marks = asyncio.run(go())

    assert "sleep infinity" in left  # the listing sees the container's processes
    assert timed_out and "sleep 30" not in left and "envloop-ran" not in marks
