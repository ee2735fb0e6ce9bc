"""Containment: each attack a hostile task or agent has been seen to try, run for real against the
bwrap sandbox, and shown to fail. Plain mode's weaker promises are checked as the docs state them.

Every test here is a trial through `envloop/shell@1`: the attack is the task's files or the agent's
command line, and the checks look at the host (files, processes, listening services) afterwards.
"""

import asyncio
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments import LocalEnvironmentProvider
from envloop.environments.local.bwrap import bwrap_executable, pasta_executable
from envloop.environments.local.identity import can_switch_user
from envloop.environments.local.instance import instances_under
from envloop.environments.procs import marked_pids
from envloop.runners import ShellRunner
from envloop.store.artifacts import ArtifactStore
from envloop.tasks.harbor import load_harbor_task
from envloop.tasks.model import TaskFormatError
from tests.conftest import captured
from tests.registries import host_listener

pytestmark = pytest.mark.skipif(
    bwrap_executable()[0] is None, reason="bwrap cannot create a sandbox on this host"
)
as_root = pytest.mark.skipif(not can_switch_user(), reason="uid switching and quotas need a root worker")
with_pasta = pytest.mark.skipif(pasta_executable()[0] is None, reason="pasta (passt) is not installed")

REWARD_ZERO = 'echo 0 > "${ENVLOOP_LOGS_DIR:-/logs}/verifier/reward.txt"\n'
ECHO_OUTPUT = 'cat "${ENVLOOP_APP_DIR:-/app}/out.txt" 2>/dev/null; true\n'


def write_task(
    root: Path, test_sh: str = REWARD_ZERO, *, toml: str = "", dockerfile: str | None = None
) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "environment").mkdir()
    (root / "task.toml").write_text('version = "1.0"\n' + toml)
    (root / "instruction.md").write_text("Solve the task.\n")
    (root / "tests" / "test.sh").write_text(test_sh)
    if dockerfile is not None:
        (root / "environment" / "Dockerfile").write_text(dockerfile)
    return root


def spec_for(tmp_path: Path, task: Path, command: str, **params: str) -> TrialSpec:
    return TrialSpec(
        job_id="job_contain",
        trial_id=new_id("trl"),
        task_name=task.name,
        attempt=1,
        profile_ref="team/hostile@1",
        runner="envloop/shell@1",
        params={"AGENT_NAME": "command", "AGENT_COMMAND": command, **params},
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
    )


def run(spec: TrialSpec, mode: str = "bwrap") -> TrialOutcome:
    return asyncio.run(ShellRunner(LocalEnvironmentProvider(mode)).run(spec))  # type: ignore[arg-type]


def agent_stdout(tmp_path: Path) -> str:
    return captured(tmp_path / "artifacts" / "agent" / "stdout.txt")


def verifier_stdout(tmp_path: Path) -> str:
    return captured(tmp_path / "artifacts" / "verifier" / "stdout.txt")


def compile_library(source: str, target: Path) -> None:
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.fail("a C compiler is needed to build the hostile library")
    code = target.with_suffix(".c")
    code.write_text(source)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(target), str(code)], check=True)
    code.unlink()


def preload_library(marker: Path) -> str:
    """A library whose constructor records, on the host, every process that loads it."""
    return (
        "#include <stdio.h>\n#include <unistd.h>\n"
        "__attribute__((constructor)) static void pwn(void) {\n"
        f'  FILE *f = fopen("{marker}", "a");\n'
        '  if (f) { fprintf(f, "loaded in pid %d uid %d\\n", getpid(), getuid()); fclose(f); }\n'
        "}\n"
    )


def test_a_task_preloaded_library_never_runs_on_the_host(tmp_path: Path) -> None:
    marker = tmp_path / "host-was-entered"
    task = write_task(
        tmp_path / "preload",
        dockerfile="FROM debian:bookworm\nWORKDIR /app\nCOPY evil.so /app/\nENV LD_PRELOAD=./evil.so\n",
        toml='[verifier.env]\nLD_PRELOAD = "./evil.so"\n[environment.env]\nLD_AUDIT = "./evil.so"\n',
    )
    compile_library(preload_library(marker), task / "environment" / "evil.so")
    outcome = run(spec_for(tmp_path, task, "echo agent ran"))
    # Inside the sandbox the library is loaded (it is the task's own business), but the host path
    # it writes to does not exist there; on the host nothing loaded it.
    assert not marker.exists(), marker.read_text()
    assert outcome.reward == 0.0


def test_an_agent_library_on_an_empty_library_path_entry_never_runs_on_the_host(tmp_path: Path) -> None:
    marker = tmp_path / "host-was-entered"
    evil = tmp_path / "libevil.so"
    compile_library(preload_library(marker), evil)
    task = write_task(
        tmp_path / "libpath",
        test_sh='echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH PATH=$PATH"\n' + REWARD_ZERO,
        dockerfile=(
            "FROM debian:bookworm\nWORKDIR /app\nCOPY libevil.so /app/\n"
            "ENV LD_LIBRARY_PATH=/usr/local/lib:$LD_LIBRARY_PATH\nENV PATH=$PATH:\n"
        ),
    )
    shutil.copy(evil, task / "environment" / "libevil.so")
    # The agent names its library after every library the host's launchers load.
    libs = "libc.so.6 libselinux.so.1 libcap.so.2 libpcre2-8.so.0 libutil.so.1"
    command = f"for l in {libs}; do cp libevil.so $l; done; echo planted"
    run(spec_for(tmp_path, task, command))
    assert not marker.exists(), marker.read_text()
    assert "LD_LIBRARY_PATH=/usr/local/lib PATH=" in verifier_stdout(tmp_path)
    path_value = verifier_stdout(tmp_path).split(" PATH=", 1)[1].strip()
    assert "" not in path_value.split(":")


def test_no_host_path_or_variable_is_visible_inside(tmp_path: Path) -> None:
    task = write_task(tmp_path / "look", test_sh=ECHO_OUTPUT + REWARD_ZERO)
    command = (
        "{ tr '\\0' ' ' < /proc/1/cmdline; echo; cat /proc/1/environ | tr '\\0' '\\n'; "
        "cat /proc/self/mountinfo; env; } > /app/out.txt"
    )
    spec = spec_for(tmp_path, task, command)
    run(spec)
    seen = verifier_stdout(tmp_path)
    assert "bwrap" in seen  # the probe did read /proc/1
    for secret in (str(tmp_path), spec.trial_id + ".r", str(Path.home()), "task-cache", "/run/envloop"):
        assert secret not in seen, secret
    assert f"ENVLOOP_TRIAL_ID={spec.trial_id}\n" in seen


@as_root
def test_the_trial_has_no_capability_and_cannot_read_root_only_files(tmp_path: Path) -> None:
    secret = tmp_path / "root-only"
    secret.write_text("host secret\n")
    secret.chmod(0o600)
    task = write_task(
        tmp_path / "caps",
        test_sh=ECHO_OUTPUT + REWARD_ZERO,
        toml='[agent]\nuser = "root"\n',
    )
    command = (
        "{ grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status; id -u; "
        "cat /etc/shadow >/dev/null 2>&1 && echo SHADOW-READ; "
        "unshare -U true 2>/dev/null && echo NESTED-USERNS; "
        "mount -t tmpfs x /mnt 2>/dev/null && echo MOUNTED; } > /app/out.txt"
    )
    run(spec_for(tmp_path, task, command))
    seen = verifier_stdout(tmp_path)
    assert "CapEff:\t0000000000000000" in seen and "CapBnd:\t0000000000000000" in seen
    assert "\n0\n" in seen  # root by name only
    for forbidden in ("SHADOW-READ", "NESTED-USERNS", "MOUNTED"):
        assert forbidden not in seen


@as_root
def test_trials_run_as_a_host_uid_of_their_own(tmp_path: Path) -> None:
    seen_uids: list[int] = []

    async def body() -> None:
        provider = LocalEnvironmentProvider("bwrap")
        task_dir = write_task(tmp_path / "uid")
        task = load_harbor_task(task_dir)
        first = spec_for(tmp_path, task_dir, "true")
        second = spec_for(tmp_path / "b", task_dir, "true")
        async with provider.instance(task, first) as a, provider.instance(task, second) as b:
            for env in (a, b):
                result = await env.exec(["sh", "-c", "touch /app/x; echo ok"])
                assert result.stdout == "ok\n"
                seen_uids.append((env.paths.app / "x").stat().st_uid)
            assert a.paths.root.stat().st_uid == os.geteuid()

    asyncio.run(body())
    assert len(set(seen_uids)) == 2
    assert all(uid >= 0x7000_0000 for uid in seen_uids)


@contextmanager
def listening_on_loopback() -> Iterator[int]:
    """A TCP service on the host's loopback that counts the connections it accepts."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(conn)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        server.close()
    assert accepted == [], "a trial reached the host's loopback service"


def host_addresses() -> list[str]:
    found = ["127.0.0.1"]
    with suppress(OSError):
        found += [info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)]
    return sorted(set(found))


@with_pasta
@pytest.mark.parametrize(
    "toml", ['[environment]\nnetwork_mode = "public"\n', "[environment]\nallow_internet = true\n"]
)
def test_a_trial_with_internet_cannot_reach_the_hosts_own_services(tmp_path: Path, toml: str) -> None:
    task = write_task(tmp_path / "net", test_sh=ECHO_OUTPUT + REWARD_ZERO, toml=toml)
    with listening_on_loopback() as port, host_listener() as everywhere:
        probes = "; ".join(
            f"timeout 2 bash -c 'exec 3<>/dev/tcp/{address}/{target}' 2>/dev/null && echo REACHED {address}"
            for address in host_addresses()
            for target in (port, everywhere.port)
        )
        # The trial does have a network of its own: a default route out.
        command = f"{{ {probes}; grep -c . /proc/net/route; }} > /app/out.txt"
        outcome = run(spec_for(tmp_path, task, command))
    seen = verifier_stdout(tmp_path)
    assert "REACHED" not in seen and everywhere.peers == []
    assert int(seen.split()[0]) >= 2, "no route: the trial got no network at all"
    assert (
        outcome.sandbox_note is not None and "network: agent public, verifier public" in outcome.sandbox_note
    )


def test_the_operator_can_close_every_trials_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOOP_TRIAL_NETWORK", "none")
    task = write_task(tmp_path / "closed", toml='[environment]\nnetwork_mode = "public"\n')
    outcome = run(spec_for(tmp_path, task, "true"))
    assert outcome.sandbox_note is not None and "network: agent no-network" in outcome.sandbox_note
    assert any("ENVLOOP_TRIAL_NETWORK=none" in warning for warning in outcome.warnings)


@pytest.mark.parametrize("mode", ["plain", "bwrap"])
def test_tests_planted_by_the_agent_are_never_run(tmp_path: Path, mode: str) -> None:
    task = write_task(tmp_path / "plant-tests")
    forged = 'echo 1 > "${ENVLOOP_LOGS_DIR:-/logs}/verifier/reward.txt"'
    command = (
        'mkdir -p "${ENVLOOP_TESTS_DIR:-/tests}" 2>/dev/null; '
        f"echo '{forged}' > \"${{ENVLOOP_TESTS_DIR:-/tests}}/test.sh\" 2>/dev/null; true"
    )
    outcome = run(spec_for(tmp_path, task, command), mode)
    assert outcome.reward == 0.0


@pytest.mark.parametrize("mode", ["plain", "bwrap"])
def test_a_process_left_by_the_agent_cannot_rewrite_the_reward(tmp_path: Path, mode: str) -> None:
    logs = "${ENVLOOP_LOGS_DIR:-/logs}"
    task = write_task(tmp_path / "daemon", test_sh=REWARD_ZERO + "sleep 1\n")
    command = (
        f"mkdir -p {logs}/verifier; "
        f"setsid nohup bash -c 'while :; do echo 1 > {logs}/verifier/reward.txt; sleep 0.01; done' "
        ">/dev/null 2>&1 & sleep 0.2; echo started"
    )
    spec = spec_for(tmp_path, task, command)
    outcome = run(spec, mode)
    assert outcome.reward == 0.0
    assert marked_pids(spec.trial_id, "ENVLOOP_TRIAL_ID") == []


def test_a_stale_run_never_shares_files_with_the_run_that_replaced_it(tmp_path: Path) -> None:
    task = write_task(tmp_path / "stale", test_sh="sleep 0.3\n" + REWARD_ZERO)
    first = spec_for(tmp_path, task, "echo first > /app/who; sleep 0.5; cat /app/who")
    second = first.model_copy(update={"run": 2, "artifacts_dir": tmp_path / "artifacts-2"})

    async def both() -> list[TrialOutcome]:
        runner = ShellRunner(LocalEnvironmentProvider("bwrap"))
        return list(await asyncio.gather(runner.run(first), runner.run(second)))

    outcomes = asyncio.run(both())
    assert [o.reward for o in outcomes] == [0.0, 0.0]
    assert first.run_id != second.run_id
    assert instances_under(tmp_path / "instances") == []


def test_only_the_recorded_run_publishes_its_artifacts(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    for run_id, text in (("trl_a.r1", "stale"), ("trl_a.r2", "recorded")):
        store.staging_dir(run_id).mkdir(parents=True)
        (store.staging_dir(run_id) / "who.txt").write_text(text)
    store.publish("trl_a.r2", "trl_a")
    store.discard("trl_a.r1")
    assert (store.trial_dir("trl_a") / "who.txt").read_text() == "recorded"
    assert store.staged_runs() == []


def test_auto_never_falls_back_to_plain_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "envloop.environments.local.provider.bwrap_executable", lambda: (None, "bwrap is not installed")
    )
    monkeypatch.delenv("ENVLOOP_SANDBOX", raising=False)
    task = write_task(tmp_path / "nobwrap")
    outcome = run(spec_for(tmp_path, task, "touch /tmp/should-not-run"), "auto")
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error.type == "environment_error"
    assert "ENVLOOP_SANDBOX=plain" in outcome.error.message
    assert outcome.sandbox is None


def test_plain_mode_keeps_only_its_documented_promises(tmp_path: Path) -> None:
    """The docs: plain mode is no sandbox (host network, host files), but still stops the agent's
    processes before the verifier, gives the verifier fresh tests, and says so on every trial."""
    task = write_task(tmp_path / "plain", test_sh=ECHO_OUTPUT + REWARD_ZERO)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        command = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo host-network > $ENVLOOP_APP_DIR/out.txt"
        outcome = run(spec_for(tmp_path, task, command), "plain")
    assert verifier_stdout(tmp_path).startswith("host-network")
    assert outcome.sandbox == "plain"
    assert any("ENVLOOP_SANDBOX=plain" in warning for warning in outcome.warnings)


def test_task_limits_are_capped_at_the_operators_ceilings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVLOOP_MAX_MEMORY_MB", "300")
    monkeypatch.setenv("ENVLOOP_MAX_TIMEOUT_SEC", "2")
    monkeypatch.setenv("ENVLOOP_MAX_CPUS", "1")
    task = write_task(
        tmp_path / "greedy",
        toml=(
            "[agent]\ntimeout_sec = 1e308\n[verifier]\ntimeout_sec = 9999999.0\n"
            "[environment]\nmemory_mb = 1000000\ncpus = 64.0\n"
        ),
    )
    outcome = run(spec_for(tmp_path, task, "sleep 30"))
    assert outcome.error is not None and outcome.error.type == "agent_timeout"
    assert "2 s timeout" in outcome.error.message
    note = outcome.sandbox_note or ""
    assert "memory 300 MB" in note and "cpus 1" in note and "agent timeout 2 s" in note
    assert any("memory 1e+06 MB asked, capped" in warning for warning in outcome.warnings)


def test_an_infinite_timeout_is_refused_when_the_task_is_loaded(tmp_path: Path) -> None:
    task = write_task(tmp_path / "forever", toml="[agent]\ntimeout_sec = inf\n")
    with pytest.raises(TaskFormatError, match="timeout_sec"):
        load_harbor_task(task)


@as_root
def test_memory_beyond_the_ceiling_is_an_out_of_memory_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVLOOP_MAX_MEMORY_MB", "128")
    task = write_task(tmp_path / "hog", toml="[environment]\nmemory_mb = 100000\n")
    hog = "python3 -c 'x = bytearray(600 * 1024 * 1024); print(len(x))'"
    outcome = run(spec_for(tmp_path, task, hog))
    assert outcome.error is not None and outcome.error.type == "resource_exhausted"
    assert "out of memory" in outcome.error.message and "128 MB" in outcome.error.message


@as_root
def test_the_disk_quota_holds_across_many_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOOP_MAX_DISK_MB", "16")
    task = write_task(tmp_path / "filler", toml="[environment]\nstorage_mb = 100000\n")
    before = shutil.disk_usage(tmp_path).used
    fill = "for i in $(seq 1 40); do head -c 1048576 /dev/zero > /app/f$i || break; done; true"
    outcome = run(spec_for(tmp_path, task, fill))
    assert outcome.error is not None and outcome.error.type == "resource_exhausted"
    assert "disk quota full" in outcome.error.message
    assert shutil.disk_usage(tmp_path).used - before < 8 * 1024 * 1024


@as_root
@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("", "1000 0"),
        ('[agent]\nuser = "root"\n', "0 0"),
        ('[agent]\nuser = "nobody"\n[verifier]\nuser = 1234\n', "65534 1234"),
    ],
)
def test_agent_and_verifier_run_as_the_task_declares(tmp_path: Path, toml: str, expected: str) -> None:
    task = write_task(
        tmp_path / "users", test_sh="echo $(cat /app/agent-uid) $(id -u)\n" + REWARD_ZERO, toml=toml
    )
    run(spec_for(tmp_path, task, "id -u > /app/agent-uid"))
    assert verifier_stdout(tmp_path).split("\n")[0] == expected


def test_a_user_only_the_image_would_create_is_refused(tmp_path: Path) -> None:
    task = write_task(tmp_path / "ghost", toml='[agent]\nuser = "ghost-user"\n')
    outcome = run(spec_for(tmp_path, task, "true"))
    assert outcome.error is not None and outcome.error.type == "environment_error"
    assert "ghost-user" in outcome.error.message and "Dockerfile" in outcome.error.message


@as_root
def test_on_cgroup_v2_processes_are_tracked_and_missing_controllers_are_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This host's v2 hierarchy has no memory or pids controller: a v2 group still holds and kills
    every process of the instance, and each limit it cannot set is named on the trial."""
    mount = tmp_path / "cgroup2"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "cgroup2", "none", str(mount)], check=False).returncode != 0:
        pytest.skip("cgroup2 cannot be mounted here")
    monkeypatch.setenv("ENVLOOP_CGROUP2_ROOT", str(mount))
    try:
        task = write_task(tmp_path / "v2")
        spec = spec_for(tmp_path, task, "setsid sleep 30 & sleep 1")
        members: list[str] = []
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                for group in (mount / "envloop").glob(f"{spec.run_id}.*"):
                    with suppress(OSError):
                        members.extend((group / "cgroup.procs").read_text().split())
                done.wait(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            outcome = run(spec)
        finally:
            done.set()
            watcher.join()
        assert len(set(members)) >= 2  # the launcher's processes and the agent's, in the v2 group
        assert outcome.reward == 0.0
        available = (mount / "cgroup.controllers").read_text().split()
        if "memory" not in available:
            assert any("memory limit not enforced by a cgroup" in w for w in outcome.warnings)
        if "pids" not in available:
            assert any("process limit not enforced by a cgroup" in w for w in outcome.warnings)
        # The group could be removed only once empty: the daemon left by the agent is gone too.
        assert [p for p in (mount / "envloop").iterdir() if p.is_dir()] == []
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_an_agent_can_neither_signal_host_processes_nor_write_host_files(tmp_path: Path) -> None:
    host = subprocess.Popen(["sleep", "60"])
    escape = tmp_path / "escaped.txt"
    try:
        task = write_task(tmp_path / "reach")
        command = (
            f"kill -9 {host.pid} 2>/dev/null; kill -9 -1 2>/dev/null; "
            f"echo out > {escape} 2>/dev/null; mkdir -p {tmp_path}/made 2>/dev/null; true"
        )
        outcome = run(spec_for(tmp_path, task, command))
        assert host.poll() is None, "a host process was killed from inside a trial"
        assert not escape.exists() and not (tmp_path / "made").exists()
        assert outcome.reward == 0.0
    finally:
        host.kill()
        host.wait()


@pytest.mark.parametrize(
    ("toml", "file", "reason"),
    [
        ("[environment]\ngpus = 1\n", None, "gpus = 1: no environment of envloop honours it"),
        ("", "docker-compose.yaml", "(sidecar services): only the docker environment honours it"),
        ('[verifier]\nenvironment_mode = "separate"\n', None, "environment_mode = separate: only the docker"),
    ],
)
def test_a_feature_the_environment_cannot_honour_is_refused_not_scored(
    tmp_path: Path, toml: str, file: str | None, reason: str
) -> None:
    task = write_task(tmp_path / "feature", toml=toml)
    if file is not None:
        (task / "environment" / file).write_text("services:\n  db:\n    image: postgres\n")
    outcome = run(spec_for(tmp_path, task, "true"))
    assert outcome.reward is None
    assert outcome.error is not None and outcome.error.type == "environment_error"
    assert reason in outcome.error.message


@as_root
def test_another_local_user_cannot_read_a_running_trials_hidden_tests(tmp_path: Path) -> None:
    task = write_task(tmp_path / "hidden", test_sh="# HIDDEN-TEST-CONTENT\n" + REWARD_ZERO)
    spec = spec_for(tmp_path, task, "sleep 4")
    running = threading.Thread(target=run, args=(spec,))
    running.start()
    try:
        deadline = time.monotonic() + 30
        while not [p for p in instances_under(spec.instance_root) if (p / "tests" / "test.sh").exists()]:
            assert time.monotonic() < deadline, "the trial never made its instance"
            time.sleep(0.05)
        root = next(p for p in instances_under(spec.instance_root) if (p / "tests" / "test.sh").exists())
        peek = subprocess.run(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "cat",
                str(root / "tests" / "test.sh"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert peek.returncode != 0 and "HIDDEN-TEST-CONTENT" not in peek.stdout
    finally:
        running.join()


@as_root
def test_what_a_trial_keeps_counts_against_its_disk_quota(tmp_path: Path) -> None:
    """Output well over a 64 MB quota, printed and left in log files, keeps at most the quota."""
    task = write_task(tmp_path / "flood", toml="[environment]\nstorage_mb = 64\n")
    logs = "${ENVLOOP_LOGS_DIR:-/logs}/agent"
    command = (
        "head -c 150000000 /dev/zero | tr '\\0' x; "
        f"for n in 1 2 3; do head -c 40000000 /dev/zero > {logs}/big-$n.log; done; true"
    )
    outcome = run(spec_for(tmp_path, task, command))
    kept = sum(path.stat().st_size for path in (tmp_path / "artifacts").rglob("*") if path.is_file())
    assert kept <= 64 * 1024 * 1024 + 1024 * 1024, kept  # the quota, and the trial's own records
    assert any("disk quota" in warning for warning in outcome.warnings), outcome.warnings


def test_two_hundred_thousand_log_files_are_kept_only_to_the_cap(tmp_path: Path) -> None:
    task = write_task(tmp_path / "many")
    logs = "${ENVLOOP_LOGS_DIR:-/logs}/agent"
    command = f"mkdir -p {logs}/many && cd {logs}/many && seq 1 200000 | xargs touch"
    outcome = run(spec_for(tmp_path, task, command))
    kept = [path for path in (tmp_path / "artifacts" / "agent").rglob("*") if path.is_file()]
    assert len(kept) <= 10_000
    assert any("were not kept" in warning for warning in outcome.warnings), outcome.warnings
    assert outcome.error is None, outcome.error
