"""envloop run as users run it: every step an `el` command in a process of its own, on a fresh
`ENVLOOP_HOME`, timed with its CPU and peak memory. Shared by `bench/trials.py` and
`bench/peers/run.py`.

CPU and memory come from `wait4` on each process, which also counts the children it waited for
(the sandboxes a worker starts). This process makes itself a child subreaper, so the worker that
`el job submit` detaches becomes its child when `el` exits and can be stopped and measured too.
"""

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from floors import VERIFIER

_EL_SCRIPT = Path(sys.executable).with_name("el")
EL = [str(_EL_SCRIPT)] if _EL_SCRIPT.exists() else [sys.executable, "-m", "envloop"]
"""The `el` command of the running venv, as users start it."""
_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Orphaned descendants (the detached background worker) are re-parented to this process, which
    must then collect them (`reap_orphans`)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap_orphans() -> int:
    """Collect every child of this process that has ended; how many. Called between runs, when no
    child of a run is left to wait for: as a subreaper this process inherits the orphans below it,
    and bwrap leaves one per sandboxed command (its child inside the sandbox). Left uncollected,
    their thousands of zombies slowed every later run of the bench (the same 300-trial job took 13
    ms per trial in its first run and 25 ms in its twelfth; collected, 13.5 to 14.2 ms in all)."""
    reaped = 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no child at all
            return reaped
        if pid == 0:  # children left, none of them ended
            return reaped
        reaped += 1


@dataclass
class Usage:
    """One process (and the children it waited for): wall seconds, CPU seconds, peak RSS in MiB."""

    wall: float
    cpu: float
    rss_mib: float
    returncode: int = 0
    follower_cpu: float = 0.0
    """For a job through the CLI: the part of `cpu` that `el job submit --wait` used itself."""
    machine_cpu: float = 0.0
    """CPU seconds the whole machine spent while it ran (`machine_busy_sec`), where it was measured."""


def machine_busy_sec() -> float:
    """CPU seconds this machine has spent busy since boot, every process and the kernel's own
    threads together (/proc/stat, less idle, I/O wait and steal). A sandboxed process that its
    launcher never waits for (bwrap's own child, inside the sandbox) is in no process's rusage:
    only this counts it."""
    with Path("/proc/stat").open() as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    idle, iowait, steal = fields[3], fields[4], fields[7] if len(fields) > 7 else 0
    return (sum(fields[:8]) - idle - iowait - steal) / os.sysconf("SC_CLK_TCK")


def reap(pid: int) -> Usage:
    """Wait for `pid` and read what it used; wall is left 0 for the caller to fill."""
    _, status, usage = os.wait4(pid, 0)
    cpu = usage.ru_utime + usage.ru_stime
    return Usage(0.0, cpu, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status))


def measured(argv: list[str], env: dict[str, str], out: Path, err: Path, cwd: Path | None = None) -> Usage:
    """Run one command to its end; stdout and stderr go to files; raise if it fails."""
    start = time.perf_counter()
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL
        )
    used = reap(proc.pid)
    proc.returncode = used.returncode
    used.wall = time.perf_counter() - start
    if used.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} exited {used.returncode}: {err.read_text()[-800:]}")
    return used


def trivial_tasks(root: Path, count: int) -> Path:
    """`count` distinct Harbor tasks: an instruction of their own, a verifier that writes 1."""
    for number in range(count):
        task = root / f"task-{number:05d}"
        (task / "tests").mkdir(parents=True)
        (task / "task.toml").write_text('version = "1.0"\n')
        (task / "instruction.md").write_text(f"Task {number}: nothing to do.\n")
        (task / "tests" / "test.sh").write_text("#!/usr/bin/env bash\n" + VERIFIER)
    return root


def profile_file(path: Path, params: dict[str, str], secret: tuple[str, ...] = ()) -> Path:
    document = {"schema_version": "envplatform.profile/v2", "secret_params": list(secret)}
    path.write_text(json.dumps({**document, "spec": {"params": params}}))
    return path


TRUE_AGENT = {"AGENT_NAME": "command", "AGENT_COMMAND": "true"}


def chat_params(base_url: str, concurrency: int) -> dict[str, str]:
    return {
        "MODEL_PROTOCOL": "openai",
        "MODEL_BASE_URL": base_url,
        "MODEL_NAME": "bench-model",
        "MODEL_API_KEY": "bench-key",
        "MAX_CONCURRENCY": str(concurrency),
    }


@dataclass
class JobRun:
    """A job through the CLI: the push, and the run (worker start to `el job submit --wait`'s exit)."""

    push: Usage
    run: Usage
    follower: Usage
    worker: Usage


def _lock_holder(home: Path) -> int | None:
    text = (home / "background-worker.lock").read_text().strip()
    return int(text) if text.isdigit() else None


def job_through_cli(
    home: Path,
    source: Path,
    profile: Path,
    *,
    capacity: int | None,
    env_extra: dict[str, str] | None = None,
    push_args: tuple[str, ...] = (),
    submit_args: tuple[str, ...] = (),
) -> JobRun:
    """Push `source`, publish `profile`, run one attempt of every task with `el job submit --wait`.

    `el job submit` starts the background worker, as a user sees it, at `capacity` trials at once
    (`--capacity`; None: its default, max(2, cores)); the worker's start counts in the run.
    """
    home.mkdir(parents=True)
    env = dict(os.environ, ENVLOOP_HOME=str(home), **(env_extra or {}))
    logs = home.parent / f"{home.name}-logs"
    logs.mkdir()
    push = measured(
        [*EL, "dataset", "push", str(source), "--name", "bench", "--json", *push_args],
        env,
        logs / "push.out",
        logs / "push.err",
    )
    measured(
        [*EL, "profile", "create", "bench/agent", "1", "--file", str(profile), "--json"],
        env,
        logs / "profile.out",
        logs / "profile.err",
    )
    start = time.perf_counter()
    submit = [*EL, "job", "submit", "--dataset", "bench@1", "--profile", "bench/agent@1"]
    submit += ["--attempts", "1", "--wait", "--json", *submit_args]
    if capacity is not None:
        submit += ["--capacity", str(capacity)]
    follower = measured(submit, env, logs / "job.out", logs / "job.err")
    wall = time.perf_counter() - start
    view = json.loads((logs / "job.out").read_text())
    tasks = len(view["tasks"])
    if view["counts"]["completed"] != tasks:
        raise RuntimeError(f"job ended {view['status']} with {view['counts']} ({logs / 'job.err'})")
    worker_pid = _lock_holder(home)
    if worker_pid is None:
        raise RuntimeError("no background worker ran the job")
    os.kill(worker_pid, signal.SIGTERM)
    worker_used = reap(worker_pid)
    reap_orphans()
    peak = max(follower.rss_mib, worker_used.rss_mib)
    run = Usage(wall, follower.cpu + worker_used.cpu, peak, follower_cpu=follower.cpu)
    return JobRun(push=push, run=run, follower=follower, worker=worker_used)


def quick_command(home: Path, args: list[str]) -> float:
    """Wall seconds of one short `el` command on `home` (start-up included)."""
    env = dict(os.environ, ENVLOOP_HOME=str(home))
    start = time.perf_counter()
    subprocess.run([*EL, *args], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def last_job_id(home: Path) -> str:
    logs = home.parent / f"{home.name}-logs"
    return str(json.loads((logs / "job.out").read_text())["id"])
