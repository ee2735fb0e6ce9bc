"""The local environment, in both modes, with real bwrap launches and real processes."""

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from envloop.core.ids import new_id
from envloop.core.trial import TrialSpec
from envloop.environments import Environment, Limits, LocalEnvironmentProvider
from envloop.environments.local.bwrap import bwrap_executable
from envloop.environments.local.instance import instances_under
from envloop.environments.local.limits import InstanceCgroups
from envloop.environments.local.on_loop import INLINE_COPY_ENTRIES
from envloop.tasks.model import HarborTask
from envloop.tasks.task_toml import TaskConfig

HAS_BWRAP = bwrap_executable()[0] is not None
needs_bwrap = pytest.mark.skipif(not HAS_BWRAP, reason="bwrap cannot create a sandbox on this host")
MODES = ["plain", pytest.param("bwrap", marks=needs_bwrap)]


def _has_pids_cgroup() -> bool:
    probe = InstanceCgroups("envloop-probe", Limits())
    ok = "pids" in probe.controllers
    probe.remove()
    return ok


def make_task(
    root: Path, *, dockerfile: str | None = None, files: dict[str, str] | None = None
) -> HarborTask:
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test.sh").write_text("echo verifier\n")
    (root / "solution").mkdir()
    (root / "solution" / "solve.sh").write_text("echo solved\n")
    (root / "environment").mkdir()
    if dockerfile is not None:
        (root / "environment" / "Dockerfile").write_text(dockerfile)
    for name, text in (files or {}).items():
        (root / "environment" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "environment" / name).write_text(text)
    return HarborTask(name=root.name, root=root, config=TaskConfig(), instruction="do it", digest="sha256:0")


def make_spec(tmp_path: Path, task: HarborTask, attempt: int = 1) -> TrialSpec:
    # Unique ids keep concurrent test sessions out of each other's cgroups and process scans.
    return TrialSpec(
        job_id="job_env",
        trial_id=new_id("trl"),
        task_name=task.name,
        attempt=attempt,
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params={},
        task_dir=task.root,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
    )


def run_in(
    mode: str, task: HarborTask, spec: TrialSpec, body: Callable[[Environment], Awaitable[None]], **kw: object
) -> None:
    provider = LocalEnvironmentProvider(mode, **kw)  # type: ignore[arg-type]

    async def main() -> None:
        async with provider.instance(task, spec) as env:
            await body(env)

    asyncio.run(main())


@pytest.mark.parametrize("mode", MODES)
def test_every_command_gets_the_trial_variables_and_a_private_home(tmp_path: Path, mode: str) -> None:
    task = make_task(tmp_path / "vars-task")
    spec = make_spec(tmp_path, task, attempt=3)

    async def body(env: Environment) -> None:
        result = await env.exec(
            [
                "bash",
                "-c",
                'echo "$ENVLOOP_JOB_ID $ENVLOOP_TRIAL_ID $ENVLOOP_TASK $ENVLOOP_ATTEMPT $LANG"; pwd; '
                'echo "$HOME"; test -d "$HOME" && echo home-exists',
            ],
            env={"EXTRA": "1"},
        )
        lines = result.stdout.splitlines()
        assert lines[0] == f"job_env {spec.trial_id} vars-task 3 C.UTF-8"
        assert lines[1] == env.visible.app
        assert lines[2] == env.visible.home
        assert lines[3] == "home-exists"
        assert result.exit_code == 0
        assert env.mode == mode

    run_in(mode, task, spec, body)


@needs_bwrap
def test_bwrap_sandbox_hides_the_host_the_store_and_other_instances(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "envloop.db").write_text("private")
    task = make_task(tmp_path / "iso-task")
    provider = LocalEnvironmentProvider("bwrap")

    async def main() -> None:
        async with (
            provider.instance(task, make_spec(tmp_path, task)) as first,
            provider.instance(task, make_spec(tmp_path, task)) as second,
        ):
            (first.paths.app / "mine.txt").write_text("first trial's file")
            probes = [
                "/root",
                "/work",
                str(store / "envloop.db"),
                str(first.paths.app / "mine.txt"),
                str(tmp_path),
                "/tests",
                "/solution",
            ]
            script = "; ".join(f'test -e "{p}" && echo "visible: {p}"' for p in probes) + "; true"
            result = await second.exec(["bash", "-c", script])
            assert result.exit_code == 0
            assert result.stdout == ""
            root = await second.exec(["ls", "/"])
            assert set(root.stdout.split()) <= {
                "app",
                "bin",
                "dev",
                "etc",
                "lib",
                "lib64",
                "logs",
                "proc",
                "sbin",
                "tmp",
                "usr",
            }

    asyncio.run(main())


@pytest.mark.parametrize("mode", MODES)
def test_tests_and_solution_are_visible_only_when_the_phase_mounts_them(tmp_path: Path, mode: str) -> None:
    task = make_task(tmp_path / "mount-task")
    spec = make_spec(tmp_path, task)

    async def body(env: Environment) -> None:
        tests_sh = f"{env.visible.tests}/test.sh"
        hidden = await env.exec(["bash", "-c", f'cat "{tests_sh}"'])
        assert hidden.exit_code != 0
        shown = await env.exec(["bash", "-c", f'cat "{tests_sh}"'], mounts=frozenset({"tests"}))
        assert shown.stdout == "echo verifier\n"
        solve = await env.exec(["bash", f"{env.visible.solution}/solve.sh"], mounts=frozenset({"solution"}))
        assert solve.stdout == "solved\n"

    run_in(mode, task, spec, body)


@needs_bwrap
def test_bwrap_network_is_loopback_only(tmp_path: Path) -> None:
    task = make_task(tmp_path / "net-task")

    async def body(env: Environment) -> None:
        result = await env.exec(["bash", "-c", "tail -n +3 /proc/net/dev | cut -d: -f1"])
        assert result.stdout.split() == ["lo"]

    run_in("bwrap", task, make_spec(tmp_path, task), body)


CLEANUP_CASES = [
    pytest.param("plain", True, id="plain"),
    pytest.param("plain", False, id="plain-without-cgroups"),
    pytest.param("bwrap", True, id="bwrap", marks=needs_bwrap),
    pytest.param("bwrap", False, id="bwrap-without-cgroups", marks=needs_bwrap),
]


@pytest.mark.parametrize(("mode", "cgroups"), CLEANUP_CASES)
def test_timeout_kills_the_whole_process_tree(tmp_path: Path, mode: str, cgroups: bool) -> None:
    task = make_task(tmp_path / "timeout-task")
    spec = make_spec(tmp_path, task)

    async def body(env: Environment) -> None:
        result = await env.exec(["bash", "-c", "sleep 100 & setsid sleep 100 & sleep 100"], timeout=0.5)
        assert result.timed_out
        assert result.exit_code is None
        assert env.instance_pids() == []  # type: ignore[attr-defined]

    run_in(mode, task, spec, body, cgroups=cgroups)


@pytest.mark.parametrize(("mode", "cgroups"), CLEANUP_CASES)
def test_daemons_and_the_instance_directory_are_gone_after_teardown(
    tmp_path: Path, mode: str, cgroups: bool
) -> None:
    task = make_task(tmp_path / "daemon-task")
    spec = make_spec(tmp_path, task)
    seen: list[Any] = []

    async def body(env: Environment) -> None:
        seen.append(env)
        # The command returns only once the daemon is in a session of its own (it has written its
        # pid), so whether it outlives the command never depends on how fast the daemon started.
        daemon = (
            "setsid bash -c 'echo $$ > daemon.pid; exec sleep 1000' >/dev/null 2>&1 & disown; "
            "for _ in $(seq 500); do [ -s daemon.pid ] && break; sleep 0.01; done; "
            "cat daemon.pid 2>/dev/null || echo 'the daemon never started'"
        )
        result = await env.exec(["bash", "-c", daemon])
        assert result.stdout.strip().isdigit(), (result.stdout, result.stderr)
        # In a sandbox the daemon dies with its command's pid namespace (the kernel kills it as the
        # namespace's first process exits); in plain mode it lives on until teardown.
        if mode == "plain":
            daemon_pid = int(result.stdout)
            # The daemon may be between two execs (bash, sleep) at the first look.
            for _ in range(200):
                if daemon_pid in env.instance_pids():  # type: ignore[attr-defined]
                    break
                await asyncio.sleep(0.01)
            alive = Path(f"/proc/{daemon_pid}").exists()
            assert daemon_pid in env.instance_pids(), f"daemon {daemon_pid} alive: {alive}"  # type: ignore[attr-defined]
        else:
            for _ in range(200):
                if not env.instance_pids():  # type: ignore[attr-defined]
                    break
                await asyncio.sleep(0.01)
            assert env.instance_pids() == []  # type: ignore[attr-defined]

    run_in(mode, task, spec, body, cgroups=cgroups)
    assert seen[0].instance_pids() == []
    assert not seen[0].paths.root.exists()


@pytest.mark.parametrize("mode", MODES)
def test_teardown_runs_when_the_body_raises(tmp_path: Path, mode: str) -> None:
    task = make_task(tmp_path / "raise-task")
    spec = make_spec(tmp_path, task)
    seen: list[Any] = []

    async def body(env: Environment) -> None:
        seen.append(env)
        await env.exec(["bash", "-c", "setsid sleep 1000 >/dev/null 2>&1 &"])
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run_in(mode, task, spec, body)
    assert seen[0].instance_pids() == []
    assert not seen[0].paths.root.exists()


@pytest.mark.parametrize(("mode", "cgroups"), CLEANUP_CASES)
def test_cancelling_mid_command_leaves_no_process_and_no_instance(
    tmp_path: Path, mode: str, cgroups: bool
) -> None:
    task = make_task(tmp_path / "cancel-task")
    spec = make_spec(tmp_path, task)
    provider = LocalEnvironmentProvider(mode, cgroups=cgroups)  # type: ignore[arg-type]
    seen: list[Any] = []

    async def trial() -> None:
        async with provider.instance(task, spec) as env:
            seen.append(env)
            await env.exec(["bash", "-c", "setsid nohup sleep 1000 >/dev/null 2>&1 & sleep 1000"])

    async def main() -> None:
        running = asyncio.create_task(trial())
        while not seen or len(_sleeps(seen[0])) < 2:
            await asyncio.sleep(0.02)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    asyncio.run(main())
    assert seen[0].instance_pids() == []
    assert not seen[0].paths.root.exists()


@pytest.mark.parametrize("mode", MODES)
def test_cancelling_while_the_instance_is_made_leaves_nothing_behind(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task with much to copy in is made on a thread that a cancel cannot stop: what it makes is
    torn down."""
    many = {f"context/{number}.txt": "x" for number in range(INLINE_COPY_ENTRIES)}
    task = make_task(tmp_path / "made-task", files=many)
    spec = make_spec(tmp_path, task)
    provider = LocalEnvironmentProvider(mode)  # type: ignore[arg-type]
    making, made = threading.Event(), []
    create = LocalEnvironmentProvider._create

    def slow_create(self: LocalEnvironmentProvider, *args: Any) -> Any:
        making.set()
        threading.Event().wait(0.5)  # the trial is cancelled meanwhile
        made.append(create(self, *args))
        return made[-1]

    monkeypatch.setattr(LocalEnvironmentProvider, "_create", slow_create)
    entered: list[bool] = []

    async def trial() -> None:
        async with provider.instance(task, spec):
            entered.append(True)

    async def main() -> None:
        running = asyncio.create_task(trial())
        while not making.is_set():
            await asyncio.sleep(0.01)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    asyncio.run(main())
    assert made and not entered
    assert not made[0].paths.root.exists()
    assert instances_under(tmp_path / "instances") == []
    assert made[0]._cgroups.dirs == []  # released to the pool, empty


def _sleeps(env: Any) -> list[int]:
    """The instance's `sleep` processes (its sandbox's own launcher processes aside)."""
    found = []
    for pid in env.instance_pids():
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "sleep":
                found.append(pid)
        except OSError:
            continue
    return found


@pytest.mark.parametrize("mode", MODES)
def test_output_streams_to_files_and_the_result_keeps_only_a_tail(tmp_path: Path, mode: str) -> None:
    task = make_task(tmp_path / "output-task")
    out = tmp_path / "captured" / "stdout.txt"

    async def body(env: Environment) -> None:
        result = await env.exec(
            ["bash", "-c", "head -c 300000 /dev/zero | tr '\\0' x; echo END"], stdout_path=out
        )
        assert out.stat().st_size == 300004
        assert len(result.stdout) <= 64 * 1024
        assert result.stdout.endswith("xEND\n")
        assert (result.stdout_whole, result.stderr, result.stderr_whole) == (False, "", True)
        short = await env.exec(["bash", "-c", "echo out; echo err >&2"])
        assert (short.stdout, short.stdout_whole, short.stderr, short.stderr_whole) == (
            "out\n",
            True,
            "err\n",
            True,
        )

    run_in(mode, task, make_spec(tmp_path, task), body)


@needs_bwrap
def test_dockerfile_workdir_env_and_copies_are_honoured_and_the_rest_reported(tmp_path: Path) -> None:
    dockerfile = (
        "FROM python:3.12-slim\nWORKDIR /srv/project\nENV GREETING=hello MODE=test\n"
        "RUN pip install nothing\nCOPY data/ ./data/\nCOPY notes.txt /etc/notes.txt\n"
    )
    task = make_task(
        tmp_path / "docker-task", dockerfile=dockerfile, files={"data/a.txt": "alpha", "notes.txt": "outside"}
    )

    async def body(env: Environment) -> None:
        result = await env.exec(["bash", "-c", 'pwd; echo "$GREETING $MODE"; cat data/a.txt'])
        assert result.stdout.splitlines() == ["/srv/project", "hello test", "alpha"]
        assert env.warnings == [
            "environment/Dockerfile: 1 RUN, 1 COPY (outside the workdir or missing source) "
            "instructions not executed in the local environment"
        ]

    run_in("bwrap", task, make_spec(tmp_path, task), body)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_a_fork_bomb_is_contained_by_the_pids_cgroup(tmp_path: Path, mode: str) -> None:
    if not _has_pids_cgroup():
        pytest.skip("no writable pids cgroup on this host")
    task = make_task(tmp_path / "bomb-task")
    spec = make_spec(tmp_path, task)
    peak: list[int] = []
    seen: list[Any] = []
    done = threading.Event()

    def watch() -> None:
        # A thread, not a task of the loop: the count must not depend on when the loop gets to it.
        # It reads the pids controller's counter: listing cgroup.procs waits on the very locks a
        # fork storm holds, and can take the whole storm to answer.
        while not done.is_set():
            if seen:
                counter = Path(seen[0]._cgroups.dirs[0], "pids.current")
                peak.append(int(counter.read_text()))
            done.wait(0.05)

    async def body(env: Environment) -> None:
        seen.append(env)
        assert "pids cgroup (max 40)" in (env.note or "")
        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            result = await env.exec(["bash", "-c", "bomb() { bomb | bomb & }; bomb; sleep 3"], timeout=3)
        finally:
            done.set()
            watcher.join()
        assert result.timed_out or result.exit_code is not None

    run_in(mode, task, spec, body, limits=Limits(pids=40))
    assert 0 < max(peak) <= 40
    assert seen[0].instance_pids() == []


def test_plain_mode_says_it_is_weaker(tmp_path: Path) -> None:
    task = make_task(tmp_path / "plain-task")

    async def body(env: Environment) -> None:
        assert env.mode == "plain"
        assert (env.note or "").startswith("plain process group: no isolation")
        assert any("ENVLOOP_SANDBOX=plain" in warning for warning in env.warnings)
        assert env.visible.app == str(env.paths.app)
        result = await env.exec(["bash", "-c", 'echo "$ENVLOOP_APP_DIR"; pwd'])
        assert result.stdout.split() == [str(env.paths.app)] * 2

    run_in("plain", task, make_spec(tmp_path, task), body)


def test_a_missing_command_is_exit_code_127(tmp_path: Path) -> None:
    task = make_task(tmp_path / "missing-task")

    async def body(env: Environment) -> None:
        result = await env.exec(["definitely-not-a-command-xyz"])
        assert result.exit_code == 127

    run_in("plain", task, make_spec(tmp_path, task), body)
    assert instances_under(tmp_path / "instances") == []


@pytest.mark.skipif(not _has_pids_cgroup(), reason="no writable pids cgroup on this host")
def test_a_reused_cgroup_gets_each_instances_own_limits() -> None:
    seen = []
    for pids in (64, 64, 32):
        groups = InstanceCgroups(new_id("trl"), Limits(pids=pids))
        [pids_dir] = [d for d, name in zip(groups.dirs, groups.controllers, strict=True) if name == "pids"]
        seen.append((pids_dir, (pids_dir / "pids.max").read_text().strip()))
        groups.remove()
    assert [value for _, value in seen] == ["64", "64", "32"]
    assert seen[0][0] == seen[1][0] == seen[2][0]


@pytest.mark.skipif(not _has_pids_cgroup(), reason="no writable pids cgroup on this host")
def test_a_pooled_cgroup_whose_directory_was_recreated_gets_its_limits_again() -> None:
    first = InstanceCgroups(new_id("trl"), Limits(pids=48))
    [pids_dir] = [d for d, name in zip(first.dirs, first.controllers, strict=True) if name == "pids"]
    first.remove()
    pids_dir.rmdir()  # gone while pooled: the next instance makes it anew, with the kernel's defaults
    second = InstanceCgroups(new_id("trl"), Limits(pids=48))
    assert pids_dir in second.dirs
    assert (pids_dir / "pids.max").read_text().strip() == "48"
    second.remove()
