"""Cold start-up of `el` commands, this tree beside a baseline revision, interleaved.

Each command runs in a fresh process (as a user's shell starts it) against one small store: a
one-task job run to its end during set-up, read directly and through `el serve` (ENVLOOP_URL, the
server running this tree). Each round also runs a one-task job end to end on a fresh home per
variant (`el dataset push`, `el profile create`, then `el job submit --wait` and the background
worker it starts), each command timed. Variants alternate command
by command (baseline, this tree, baseline, this tree, …) so machine noise hits both alike; each
figure is the median over the rounds, wall and CPU (user + system, from wait4) in seconds. Each
variant reads its own copy of the store: the query cache of a home holds the queries as one tree
compiled them, so variants sharing a home would each find the other's and compile again every run.

    .venv/bin/python bench/startup.py --baseline 9e0fad4 --rounds 9   # before the lazy imports

The embedded `el job get` and `el job result` are held to 0.3 s (median wall, this tree); the last
lines say whether they meet it. The baseline's `src/` is exported with `git archive` into a
temporary directory; both variants use this venv's interpreter and packages. Each variant runs
every command once before the rounds, so neither pays for writing its bytecode cache (nor this
tree for compiling its queries into the home's query cache) inside a measured run.
"""

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMANDS = [
    (["--help"], False),
    (["job", "--help"], False),
    (["job", "list"], False),
    (["job", "get", "{job}"], False),
    (["job", "result", "{job}"], False),
    (["job", "get", "{job}"], True),
    (["job", "result", "{job}"], True),
    (["trial", "list", "--job", "{job}"], False),
    (["trial", "get", "{trial}"], False),
    (["trial", "logs", "{trial}", "--phase", "agent"], False),
]
"""Each command, and whether it runs against the server (ENVLOOP_URL) instead of the store."""
TARGET_SEC = 0.3
"""The most an embedded `el job get` or `el job result` may take, cold (median wall)."""
TARGETED = (3, 4)
"""The indices in COMMANDS of the embedded reads held to TARGET_SEC."""
ONE_TASK, PUSH, CREATE, FIRST_READ = (len(COMMANDS) + n for n in range(4))
"""The indices under which the fresh home's `el dataset push`, `el profile create`, one-task job and
first `el job result` figures are kept."""


def run(src: Path, home: Path, argv: list[str], server: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of `el ARGV` with `src` first on the path; raises if it fails."""
    env = {**os.environ, "PYTHONPATH": str(src), "ENVLOOP_HOME": str(home)}
    for name in ("ENVLOOP_URL", "ENVLOOP_API_KEY", "ENVLOOP_DATABASE_URL", "ENVLOOP_ARTIFACTS"):
        env.pop(name, None)
    env.update(server or {})
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "envloop", *argv],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    errors = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"el {' '.join(argv)} failed ({proc.returncode}): {errors.decode()[-400:]}")
    return wall, usage.ru_utime + usage.ru_stime


def one_task_setup(src: Path, home: Path, work: Path) -> tuple[tuple[float, float], tuple[float, float]]:
    """Push one task (made under `work` once) and create a profile for it on `home`; the wall and
    CPU of each of the two commands."""
    task = work / "tasks" / "hello"
    if not task.exists():
        (task / "tests").mkdir(parents=True)
        (task / "solution").mkdir()
        (task / "environment").mkdir()
        (task / "task.toml").write_text('version = "1.0"\n')
        (task / "instruction.md").write_text("Create done.\n")
        (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
        solve = '#!/usr/bin/env bash\ntouch "${ENVLOOP_APP_DIR:-/app}/done"\n'
        (task / "solution" / "solve.sh").write_text(solve)
        (task / "tests" / "test.sh").write_text(
            '#!/usr/bin/env bash\nif [ -f "${ENVLOOP_APP_DIR:-/app}/done" ]; then r=1; else r=0; fi\n'
            'echo $r > "${ENVLOOP_LOGS_DIR:-/logs}/verifier/reward.txt"\n'
        )
        (work / "oracle.json").write_text(
            json.dumps(
                {"schema_version": "envplatform.profile/v2", "spec": {"params": {"AGENT_NAME": "oracle"}}}
            )
        )
    pushed = run(src, home, ["dataset", "push", str(work / "tasks"), "--name", "hello"])
    created = run(src, home, ["profile", "create", "team/oracle", "1", "--file", str(work / "oracle.json")])
    return pushed, created


SUBMIT = ["job", "submit", "--dataset", "hello@1", "--profile", "team/oracle@1", "--wait", "--json"]


def one_task_job(src: Path, home: Path, work: Path) -> tuple[str, str]:
    """Push one task, create a profile, run a job to its end; its id and its trial's."""
    one_task_setup(src, home, work)
    env = {**os.environ, "PYTHONPATH": str(src), "ENVLOOP_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-m", "envloop", *SUBMIT], env=env, check=True, capture_output=True, text=True
    )
    stop_background_worker(home)
    job = str(json.loads(done.stdout)["id"])
    listed = subprocess.run(
        [sys.executable, "-m", "envloop", "trial", "list", "--job", job, "--json"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return job, str(json.loads(listed.stdout)[0]["id"])


def one_task_run(src: Path, home: Path, work: Path) -> dict[int, tuple[float, float]]:
    """A one-task job end to end on a fresh home, as a user meets it cold: `el dataset push`, `el
    profile create`, then `el job submit --wait` and the background worker it starts (wall; CPU of
    the submitting process), then the home's first read, `el job result`."""
    pushed, created = one_task_setup(src, home, work)
    measured = run(src, home, SUBMIT)
    stop_background_worker(home)
    with contextlib.closing(sqlite3.connect(home / "envloop.db")) as db:  # not an `el` read: unmeasured
        [job] = db.execute("SELECT id FROM jobs").fetchone()
    first_read = run(src, home, ["job", "result", job])
    return {PUSH: pushed, CREATE: created, ONE_TASK: measured, FIRST_READ: first_read}


def stop_background_worker(home: Path) -> None:
    """The worker `el job submit` started would otherwise idle beside the measured runs for 30 s."""
    lock = home / "background-worker.lock"
    text = lock.read_text().strip() if lock.exists() else ""
    if not text.isdigit():
        return
    pid = int(text)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.1)


def start_server(home: Path, log: Path) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    """`el serve` (API only) on the store, and the variables that point `el` at it."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "ENVLOOP_HOME": str(home)}
    el = [sys.executable, "-m", "envloop"]
    key = json.loads(
        subprocess.run([*el, "key", "create", "--json"], env=env, check=True, capture_output=True).stdout
    )["key"]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [*el, "serve", "--port", str(port), "--workers", "0"], env=env, stdout=sink, stderr=sink
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/v1/health", timeout=5):
            return proc, {"ENVLOOP_URL": url, "ENVLOOP_API_KEY": key}
        time.sleep(0.2)
    proc.terminate()
    raise SystemExit(f"el serve did not answer: {log.read_text()[-400:]}")


def export_tree(rev: str, dest: Path) -> Path:
    archive = subprocess.run(["git", "archive", rev, "src"], cwd=REPO, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest / "src"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--baseline", required=True, help="git revision to compare this tree with")
    args = parser.parse_args()
    # As a user's shell runs `el`: with its bytecode cached (a variable set in some shells stops that).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so the server below is stopped too
    baseline = args.baseline
    with tempfile.TemporaryDirectory(prefix="envloop-startup-") as tmp:
        work = Path(tmp)
        variants = {f"baseline {baseline[:10]}": export_tree(baseline, work), "this tree": REPO / "src"}
        home = work / "home"
        job, trial = one_task_job(REPO / "src", home, work)
        homes = {name: work / f"home-{number}" for number, name in enumerate(variants)}
        for copy in homes.values():
            shutil.copytree(home, copy)
        server, target = start_server(home, work / "serve.log")
        try:
            commands = [
                ([part.format(job=job, trial=trial) for part in argv], target if remote else None)
                for argv, remote in COMMANDS
            ]
            for name, src in variants.items():  # bytecode and query caches written beforehand
                for argv, env in commands:
                    run(src, homes[name], argv, env)
            times: dict[tuple[str, int], list[tuple[float, float]]] = {}
            for number in range(args.rounds):
                for index, (argv, env) in enumerate(commands):
                    for name, src in variants.items():
                        times.setdefault((name, index), []).append(run(src, homes[name], argv, env))
                for variant, (name, src) in enumerate(variants.items()):
                    fresh = work / f"one-task-{variant}-{number}"
                    for index, measured in one_task_run(src, fresh, work).items():
                        times.setdefault((name, index), []).append(measured)
        finally:
            server.terminate()
            server.wait()
        load = os.getloadavg()[0]
    print(f"cold start-up of `el`, median of {args.rounds} interleaved rounds (load average {load:.1f})")
    print(f"{'command':<28}" + "".join(f"{name:>30}" for name in variants))
    rows = [
        (
            "el "
            + " ".join(argv).replace("{job}", "JOB").replace("{trial}", "TRIAL")
            + (" (server)" if remote else ""),
            index,
        )
        for index, (argv, remote) in enumerate(COMMANDS)
    ]
    fresh_home = [
        ("el dataset push, new home", PUSH),
        ("el profile create", CREATE),
        ("one-task job, cold", ONE_TASK),
        ("el job result, first read", FIRST_READ),
    ]
    for shown, index in [*rows, *fresh_home]:
        cells = []
        for name in variants:
            walls, cpus = zip(*times[(name, index)], strict=True)
            cells.append(f"{statistics.median(walls):7.3f} s wall {statistics.median(cpus):6.3f} s CPU")
        print(f"{shown:<28}" + "".join(f"{cell:>30}" for cell in cells))
    print("one-task job, cold: el job submit --wait on a fresh home and the worker it starts (CPU: el only)")
    print("el dataset push and el profile create: the first two commands on that fresh home")
    print("el job result, first read: the first command on that home after the job that reads it")
    for index in TARGETED:
        wall = statistics.median(w for w, _ in times[("this tree", index)])
        verdict = "met" if wall <= TARGET_SEC else "not met"
        print(f"target {rows[index][0]} <= {TARGET_SEC} s: this tree {wall:.3f} s, {verdict}")


if __name__ == "__main__":
    main()
