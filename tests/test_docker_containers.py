"""Trial containers on a real Docker daemon: isolation, limits, commands, copies and cleanup."""

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from envloop.environments.docker import leftovers
from envloop.environments.docker.base_images import DEBIAN_IMAGE
from envloop.environments.docker.cli import docker_binary
from envloop.environments.docker.container_spec import ContainerSpec
from envloop.environments.docker.containers import Container, running_container
from envloop.environments.docker.engine import Engine, engine
from envloop.environments.docker.orphans import trial_containers
from envloop.environments.docker.registration import sweep_leftovers as sweep_docker_leftovers
from envloop.environments.docker.transfer import Owner
from envloop.environments.docker.workspace import ContainerSnapshots
from envloop.trajectories.workspace import Snapshot
from tests.docker_daemon import command_running, container_commands, docker_daemon

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon"]


def _spec(trial: str, **fields: object) -> ContainerSpec:
    return ContainerSpec(image=DEBIAN_IMAGE, trial_id=trial, **fields)  # type: ignore[arg-type]


def _inspect(name: str) -> dict[str, object]:
    done = subprocess.run([docker_binary(), "inspect", name], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)[0]  # type: ignore[no-any-return]


@pytest.fixture
def host_server() -> Iterator[int]:
    """A TCP server on every host address that answers "host-secret" to whoever connects."""
    server = socket.create_server(("0.0.0.0", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                connection, _ = server.accept()
                with connection:
                    connection.sendall(b"host-secret\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def _host_addresses() -> list[str]:
    found = {"127.0.0.1"}
    for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
        found.add(str(info[4][0]))
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 1))
        found.add(probe.getsockname()[0])
    return sorted(found)


def test_container_network_is_off_by_default_and_the_host_is_unreachable(host_server: int) -> None:
    addresses = _host_addresses()
    with socket.create_connection(("127.0.0.1", host_server), timeout=2) as sanity:
        assert sanity.recv(64) == b"host-secret\n"
    probes = " ".join(
        f"(timeout 3 bash -c 'cat < /dev/tcp/{address}/{host_server}' && echo REACHED {address});"
        for address in addresses
    )

    async def go() -> tuple[str, str, str]:
        async with running_container(_spec("trl_net")) as container:
            interfaces = await container.exec(["sh", "-c", "tail -n +3 /proc/net/dev | cut -d: -f1"])
            routes = await container.exec(["sh", "-c", "tail -n +2 /proc/net/route"])
            reach = await container.exec(["bash", "-c", probes], timeout=60)
            return interfaces.stdout, routes.stdout, reach.stdout + reach.stderr

    interfaces, routes, reach = asyncio.run(go())

    assert interfaces.split() == ["lo"]
    assert routes.strip() == ""
    assert "REACHED" not in reach and "host-secret" not in reach


def test_memory_limit_is_enforced_by_killing_the_command_that_exceeds_it() -> None:
    async def go() -> tuple[str, int | None]:
        async with running_container(_spec("trl_mem", memory_mb=64)) as container:
            limit = await container.exec(["cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes"])
            # `tail` keeps a whole "line" of 256 MB of zeros in memory.
            hog = await container.exec(["sh", "-c", "head -c 268435456 /dev/zero | tail -n 1 >/dev/null"])
            return limit.stdout.strip(), hog.exit_code

    limit, code = asyncio.run(go())

    assert limit == str(64 * 1024 * 1024)
    assert code == 128 + 9  # SIGKILL from the kernel's out-of-memory killer


def test_pids_limit_stops_a_fork_storm() -> None:
    async def go() -> tuple[int, str]:
        async with running_container(_spec("trl_pids", pids=24)) as container:
            # dash gives up at the first refused fork (bash would retry for seconds).
            storm = await container.exec(
                ["sh", "-c", "for i in $(seq 60); do sleep 30 & done; sleep 1"], timeout=20
            )
            # Counted from the host: a command inside would need a pid the storm may still hold.
            sleeping = [line for line in await container_commands(container.name) if line.startswith("sleep")]
            return len(sleeping), storm.stdout + storm.stderr

    sleeping, output = asyncio.run(go())

    assert sleeping < 24
    assert "Cannot fork" in output


def test_exec_runs_as_the_user_in_the_directory_with_env_and_streams_output_to_files(tmp_path: Path) -> None:
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"

    async def go() -> tuple[int | None, str]:
        spec = _spec("trl_exec", env={"TASK_SECRET": "s3cr3t-value"}, workdir="/srv")
        async with running_container(spec) as container:
            result = await container.exec(
                ["sh", "-c", 'id -u; pwd; echo "$TASK_SECRET $EXTRA"; echo oops >&2; exit 7'],
                user="65534",
                cwd="/tmp",
                env={"EXTRA": "extra-value"},
                stdout=out,
                stderr=err,
            )
            created = _inspect(container.id)
            return result.exit_code, json.dumps(created)

    code, inspected = asyncio.run(go())

    assert code == 7
    assert out.read_text() == "65534\n/tmp\ns3cr3t-value extra-value\n"
    assert err.read_text() == "oops\n"
    assert '"Mounts": []' in inspected
    assert '"NetworkMode": "none"' in inspected


def test_timeout_kills_every_process_the_command_started() -> None:
    async def go() -> tuple[bool, int | None, str]:
        async with running_container(_spec("trl_timeout")) as container:
            result = await container.exec(
                ["bash", "-c", "sleep 300 & setsid sleep 301 & sleep 302"], timeout=1
            )
            left = await container.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"])
            return result.timed_out, result.exit_code, left.stdout

    timed_out, code, left = asyncio.run(go())

    assert (timed_out, code) == (True, None)
    assert "sleep 30" not in left


def test_files_cross_as_copies_owned_as_asked_and_links_or_fifos_never_come_out(tmp_path: Path) -> None:
    source = tmp_path / "tests"
    (source / "sub").mkdir(parents=True)
    (source / "test.sh").write_text("#!/bin/sh\necho ok\n")
    (source / "test.sh").chmod(0o755)
    (source / "sub" / "data.txt").write_text("data\n")
    out = tmp_path / "out"

    async def go() -> tuple[str, bytes, list[str]]:
        async with running_container(_spec("trl_copy")) as container:
            await container.put_dir(source, "/tests", owner=Owner(uid=1234, gid=1234))
            await container.put_file("/logs/verifier/note.txt", b"note\n")
            listing = await container.exec(
                ["sh", "-c", "stat -c '%u %a %n' /tests/test.sh /tests/sub/data.txt"]
            )
            await container.exec(
                ["sh", "-c", "cd /logs/verifier && echo 1 > reward.txt && ln -s /etc/passwd pw && mkfifo f"]
            )
            report = await container.get_dir("/logs", out)
            return listing.stdout, await container.read_file("/logs/verifier/reward.txt"), report.skipped

    listing, reward, skipped = asyncio.run(go())

    assert listing == "1234 755 /tests/test.sh\n1234 644 /tests/sub/data.txt\n"
    assert reward == b"1\n"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "verifier",
        "verifier/note.txt",
        "verifier/reward.txt",
    ]
    assert sorted(skipped) == ["verifier/f: FIFO not kept", "verifier/pw: symlink to /etc/passwd not kept"]


def test_copy_out_of_a_missing_path_says_so() -> None:
    async def go() -> None:
        async with running_container(_spec("trl_missing")) as container:
            await container.read_file("/logs/verifier/reward.txt")

    with pytest.raises(FileNotFoundError, match="no such file"):
        asyncio.run(go())


def test_stop_kills_daemons_left_behind_but_keeps_the_files() -> None:
    async def go() -> tuple[bytes, str]:
        async with running_container(_spec("trl_stop")) as container:
            await container.exec(["sh", "-c", "echo kept > /tmp/kept; setsid sleep 600 >/dev/null 2>&1 &"])
            await container.stop()
            kept = await container.read_file("/tmp/kept")
            after = await container.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"])
            return kept, after.stdout

    kept, processes = asyncio.run(go())

    assert kept == b"kept\n"
    assert "sleep 600" not in processes


_PROCESSES = "for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline; echo; done"


def test_stop_between_phases_kills_a_forking_swarm_without_restarting_the_container() -> None:
    """The leftovers a hostile agent would leave: a loop that keeps forking, orphans re-parented to
    the container's init, a process that ignores SIGTERM and SIGHUP, a writer that keeps rewriting
    a reward. After `stop` none runs, the writer's file stops changing, and the container was not
    restarted (it kept its own two processes)."""
    swarm = (
        "setsid sh -c 'while :; do sleep 30 & sleep 0.01; done' >/dev/null 2>&1 & "
        "(setsid sh -c 'trap \"\" TERM HUP; while :; do sleep 1; done' >/dev/null 2>&1 &) ; "
        "nohup sh -c 'while :; do date +%s%N > /tmp/written; done' >/dev/null 2>&1 & "
        "sleep 0.5"
    )

    async def go() -> tuple[str, str, str, bytes, bytes]:
        async with running_container(_spec("trl_swarm")) as container:
            started = str(_inspect(container.id)["State"]["StartedAt"])  # type: ignore[index]
            await container.exec(["sh", "-c", swarm])
            await container.stop()
            first = await container.read_file("/tmp/written")
            await asyncio.sleep(0.3)
            second = await container.read_file("/tmp/written")
            after = await container.exec(["sh", "-c", _PROCESSES])
            return started, str(_inspect(container.id)["State"]["StartedAt"]), after.stdout, first, second  # type: ignore[index]

    started, started_after, processes, first, second = asyncio.run(go())

    assert started_after == started
    assert first == second
    running = [line for line in processes.splitlines() if line.strip() and "/proc/[0-9]" not in line]
    assert sorted(running) == sorted(
        ["/sbin/docker-init -- sh -c sleep infinity ", "sleep infinity "]
    ) or sorted(running) == sorted(
        ["/sbin/docker-init -- sh -c sleep infinity ", "sh -c sleep infinity ", "sleep infinity "]
    )


def test_a_container_that_is_gone_is_asked_to_pause_once_not_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pausing is tried again only while the container is there: a removed one answers 404 at once
    and the caller falls back without waiting through the retries."""
    asked: list[str] = []
    real_request = Engine.request

    async def counting(self: Engine, method: str, path: str, **kwargs: object) -> object:
        asked.append(path)
        return await real_request(self, method, path, **kwargs)  # type: ignore[arg-type]

    async def go() -> bool:
        async with running_container(_spec("trl_gone")) as container:
            gone = container.id
        monkeypatch.setattr(Engine, "request", counting)
        return await leftovers._paused(gone)

    assert asyncio.run(go()) is False
    assert len(asked) == 1 and asked[0].endswith("/pause")


def test_an_image_with_an_entrypoint_is_restarted_instead_and_its_leftovers_die_all_the_same(
    tmp_path: Path,
) -> None:
    """An ENTRYPOINT may start the task's services: such a container is killed whole and started
    again (the services start afresh) rather than cleared in place."""
    image = "envloop-test-entrypoint:1"
    (tmp_path / "Dockerfile").write_text(f'FROM {DEBIAN_IMAGE}\nENTRYPOINT ["/usr/bin/env"]\n')
    subprocess.run(
        [docker_binary(), "build", "-q", "-t", image, str(tmp_path)], check=True, capture_output=True
    )

    async def go() -> tuple[str, str, str]:
        async with running_container(ContainerSpec(image=image, trial_id="trl_entry")) as container:
            started = str(_inspect(container.id)["State"]["StartedAt"])  # type: ignore[index]
            await container.exec(["sh", "-c", "setsid sleep 600 >/dev/null 2>&1 &"])
            await container.stop()
            after = await container.exec(["sh", "-c", _PROCESSES])
            return started, str(_inspect(container.id)["State"]["StartedAt"]), after.stdout  # type: ignore[index]

    try:
        started, started_after, processes = asyncio.run(go())
    finally:
        subprocess.run([docker_binary(), "rmi", "-f", image], capture_output=True, check=False)

    assert started_after != started
    assert "sleep 600" not in processes


def test_an_agent_that_ends_the_keep_up_command_leaves_a_stopped_container_the_next_command_restarts() -> (
    None
):
    end_keeper = (
        "echo kept > /tmp/kept; for d in /proc/[0-9]*; do "
        'case "$(tr "\\0" " " < $d/cmdline)" in "sleep infinity "*) kill -KILL "${d#/proc/}";; esac; done; '
        "sleep 1"
    )

    async def go() -> tuple[bool, bool, bytes, int | None]:
        async with running_container(_spec("trl_keeper")) as container:
            await container.exec(["sh", "-c", end_keeper])
            await container.stop()
            # The exec returns as the container's processes die, which can be before the daemon
            # has recorded the exit: a stopped container is one the daemon sees stopped.
            inspected = await engine().json("GET", f"/containers/{container.id}/json")
            stopped = container.stopped
            kept = await container.read_file("/tmp/kept")
            return stopped, inspected["State"]["Running"], kept, (await container.exec(["true"])).exit_code

    for _ in range(3):
        stopped, running, kept, code = asyncio.run(go())

        assert stopped
        assert not running
        assert kept == b"kept\n"
        assert code == 0


def test_container_is_removed_when_the_trial_is_cancelled() -> None:
    started = asyncio.Event()

    async def trial() -> None:
        async with running_container(_spec("trl_cancel")) as container:
            started.set()
            await container.exec(["sleep", "600"])

    async def go() -> list[str]:
        task = asyncio.create_task(trial())
        await asyncio.wait_for(started.wait(), 60)
        await command_running("trl_cancel", "sleep 600")
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return await trial_containers("trl_cancel")

    assert asyncio.run(go()) == []


def test_container_is_removed_when_the_trial_fails() -> None:
    async def go() -> None:
        async with running_container(_spec("trl_fails")):
            raise RuntimeError("runner crashed")

    with pytest.raises(RuntimeError, match="runner crashed"):
        asyncio.run(go())
    assert asyncio.run(trial_containers("trl_fails")) == []


_WORKER = """
import asyncio, sys
from envloop.environments.docker.container_spec import ContainerSpec
from envloop.environments.docker.containers import Container
from envloop.environments.docker.base_images import DEBIAN_IMAGE

async def main():
    container = await Container.start(ContainerSpec(image=DEBIAN_IMAGE, trial_id=sys.argv[1]))
    print(container.name, flush=True)
    await container.exec(["sleep", "600"])  # the worker is killed during this

asyncio.run(main())
"""


def test_orphan_sweep_removes_containers_of_killed_workers_and_spares_live_ones() -> None:
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER, "trl_orphan"], stdout=subprocess.PIPE, text=True, env={**os.environ}
    )
    assert worker.stdout is not None
    orphan = worker.stdout.readline().strip()

    async def go() -> tuple[list[str], list[str], list[str]]:
        live = await Container.start(_spec("trl_live"))
        try:
            await command_running("trl_orphan", "sleep 600")
            worker.send_signal(signal.SIGKILL)  # no finally, no cleanup: as a crash or an OOM kill
            worker.wait()
            # At once: any worker that starts on this host meanwhile sweeps orphans too.
            before = await trial_containers("trl_orphan")
            removed = await sweep_docker_leftovers()  # what a starting worker runs
            return before, removed, await trial_containers("trl_live")
        finally:
            await live.remove()

    before, removed, live = asyncio.run(go())

    assert before == [orphan]
    assert orphan in removed
    assert asyncio.run(trial_containers("trl_orphan")) == []
    assert len(live) == 1


def test_a_variable_name_that_would_smuggle_a_value_onto_the_command_line_is_refused() -> None:
    async def go() -> None:
        async with running_container(_spec("trl_envname")) as container:
            await container.exec(["true"], env={"A=visible-in-ps": "x"})

    with pytest.raises(ValueError, match="not a valid environment variable name"):
        asyncio.run(go())
    with pytest.raises(ValueError, match="not a valid environment variable name"):
        asyncio.run(Container.start(_spec("trl_envname2", env={"--privileged": "x"})))
    assert asyncio.run(trial_containers("trl_envname")) == []
    assert asyncio.run(trial_containers("trl_envname2")) == []


def test_exec_keeps_only_the_tail_of_long_output_while_the_file_keeps_all(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"

    async def go() -> tuple[str, bool, str, bool]:
        async with running_container(_spec("trl_tail")) as container:
            short = await container.exec(["echo", "short"])
            long = await container.exec(["sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x"], stdout=out)
            return short.stdout, short.stdout_whole, long.stdout, long.stdout_whole

    short, short_whole, tail, tail_whole = asyncio.run(go())

    assert (short, short_whole) == ("short\n", True)
    assert (len(tail), tail_whole) == (64 * 1024, False)
    assert out.stat().st_size == 200_000


def test_a_file_changed_again_after_set_up_and_one_removed_are_seen_where_the_daemons_diff_is_blind(
    tmp_path: Path,
) -> None:
    """Read from the writable layer, a file that set-up wrote and the agent rewrote with the same
    size and a forged mtime is changed; the daemon's diff says `changed` both times and misses it."""
    from envloop.environments.docker import layer_changes  # noqa: PLC0415

    async def go() -> tuple[dict[str, str], dict[str, str], dict[str, str], dict[str, str], bool]:
        async with running_container(_spec("trl_layer")) as container:

            async def run(script: str) -> None:
                done = await container.exec(
                    ["sh", "-c", script], stdout=tmp_path / "o", stderr=tmp_path / "e"
                )
                assert done.exit_code == 0, (tmp_path / "e").read_text()

            await run("echo one > /usr/local/bin/tool && touch /etc/setup-only && sync")
            before = await container.changes()
            daemon_before = await layer_changes.read_daemon_diff(container.id)
            await asyncio.sleep(0.05)  # a later ctime than set-up's, on any clock granularity
            await run(
                "echo two > /usr/local/bin/tool && touch -d '2001-01-01' /usr/local/bin/tool "
                "&& rm /etc/setup-only /etc/debian_version"
            )
            after = await container.changes()
            daemon = await layer_changes.read_daemon_diff(container.id)
            upper = await layer_changes.layer_dirs(container.id) is not None
            return before, after, daemon_before, daemon, upper

    before, after, daemon_before, daemon, from_upper = asyncio.run(go())
    assert from_upper  # the worker runs as root beside the daemon here
    assert before["/usr/local/bin/tool"] != after["/usr/local/bin/tool"]
    assert daemon_before["/usr/local/bin/tool"] == daemon["/usr/local/bin/tool"]  # "added", both times
    assert "/etc/setup-only" in before and "/etc/setup-only" not in after
    assert after["/etc/debian_version"] == "deleted"
    # The same paths as the daemon's own diff, directories included.
    assert set(after) == set(daemon)


def test_snapshots_through_the_daemons_archive_read_every_changed_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the worker cannot see the container's filesystem, the daemon's tar of the working
    directory gives the same states: long names, a name that is not UTF-8, files changed since the
    previous snapshot read again and the others kept."""

    async def unseen(self: Container) -> None:
        return None

    monkeypatch.setattr(Container, "host_root", unseen)
    long_names = "for i in $(seq 1 700); do echo $i > /app/$(printf 'f%0100d' $i); done"
    odd_name = "printf odd > /app/$(printf 'caf\\351')"

    async def go() -> tuple[Snapshot, Snapshot]:
        async with running_container(_spec("trl_snap", workdir="/app")) as container:
            snapshots = ContainerSnapshots(container, "/app")
            await container.exec(["sh", "-c", "mkdir -p /app && echo one > /app/a.txt"], user="0")
            few = await snapshots.take()
            await container.exec(["sh", "-c", f"{long_names}; {odd_name}"], user="0")
            return few, await snapshots.take(few)

    few, many = asyncio.run(go())

    assert list(few) == ["a.txt"] and few["a.txt"].text == "one\n"
    assert len(many) == 702
    assert many[f"f{700:0100d}"].text == "700\n"
    odd = "caf\udce9"  # the escape of the byte that is not UTF-8
    assert many[odd].text == "odd"
    assert many["a.txt"].text == "one\n"


def test_snapshots_read_from_the_host_never_follow_the_containers_links_or_open_its_devices() -> None:
    """Read from the host, a container's links lead to the host's files: a link to `/`, to the
    host's /etc/hostname and a directory link are recorded as links; a FIFO and a device node made
    inside (docker grants CAP_MKNOD) are neither waited on nor opened; the same tree read through
    the daemon's archive records the same."""
    plant = (
        "mkdir -p /app/sub && echo mine > /app/sub/mine.txt && ln -s / /app/root-link && "
        "ln -s /etc/hostname /app/hostname && mkfifo /app/pipe && mknod /app/null c 1 3"
    )

    async def go() -> tuple[Path | None, Snapshot, Snapshot]:
        async with running_container(_spec("trl_host_snap", workdir="/app")) as container:
            await container.exec(["sh", "-c", plant], user="0")
            snapshots = ContainerSnapshots(container, "/app")
            root = await container.host_root()
            on_host = await snapshots.take()
            container.host_root = _unseen  # type: ignore[method-assign]
            return root, on_host, await snapshots.take()

    root, on_host, through_archive = asyncio.run(go())

    assert root is not None, "the worker runs as root beside the daemon here"
    assert set(on_host) == {"sub/mine.txt", "root-link", "hostname"}
    assert on_host["root-link"].text == "-> /\n" and on_host["hostname"].text == "-> /etc/hostname\n"
    assert on_host["sub/mine.txt"].text == "mine\n"
    assert {path: state.digest for path, state in on_host.items()} == {
        path: state.digest for path, state in through_archive.items()
    }


def test_a_working_directory_reached_through_a_link_is_snapshotted_from_inside() -> None:
    """`/app` a link to `/etc` inside: from the host the link would lead to the host's /etc, so the
    snapshot is taken from the daemon's archive, which resolves it inside the container."""

    async def go() -> Snapshot:
        async with running_container(_spec("trl_link_app")) as container:
            await container.exec(
                ["sh", "-c", "mkdir -p /srv/work && echo in > /srv/work/in.txt && ln -s /srv/work /app"],
                user="0",
            )
            return await ContainerSnapshots(container, "/app").take()

    states = asyncio.run(go())

    assert set(states) == {"in.txt"}


async def _unseen() -> None:
    return None
