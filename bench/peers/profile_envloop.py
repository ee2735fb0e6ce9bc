"""Where envloop's time goes on the realistic shape: the worker and the `el job submit --wait`
follower sampled by py-spy on N distinct trivial tasks, and `python -X importtime` of `el --help`.

    .venv/bin/python bench/peers/profile_envloop.py [--tasks 1000] [--sandbox plain|bwrap]
                                                    [--capacity 4] [--py-spy PATH]

py-spy is a tool, not a dependency of envloop: install it anywhere (for instance
`python -m venv ~/.cache/envloop-bench/tools && ~/.cache/envloop-bench/tools/bin/pip install
py-spy==0.4.1`, the default path here). Only the thread holding the GIL is sampled (`--gil`), so each
share below is a share of the Python CPU of that process (its children's CPU is not in it), not of
the wall clock. The worker runs as one process (`--processes 1`) so that py-spy sees all of it.
"""

import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))

import cli_runs  # noqa: E402

TOP = 18


def _record(py_spy: Path, out: Path, command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    argv = [str(py_spy), "record", "--gil", "--format", "raw", "--rate", "250", "--output", str(out)]
    argv += ["--", *command]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _frame_name(frame: str) -> str:
    """`func (path/to/module.py:12)` → `func (package/module.py)`, short enough to read."""
    match = re.match(r"(.*) \((.*?):\d+\)$", frame)
    if not match:
        return frame
    function, path = match.groups()
    for marker in ("site-packages/", "/src/", "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{function} ({path})"


def _summarise(raw: Path, title: str) -> None:
    """Self and inclusive shares of the sampled CPU, per function."""
    own: collections.Counter[str] = collections.Counter()
    within: collections.Counter[str] = collections.Counter()
    total = imports = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        if "_find_and_load" in stack:  # start-up: a fixed cost, shown apart
            imports += count
            continue
        frames = [_frame_name(f) for f in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            within[frame] += count
    print(f"\n{title}: {total + imports} samples holding the GIL, {imports} of them importing modules")
    print(f"shares of the other {total} (the part that grows with the job):")
    print(" self%  incl%  function")
    for frame, count in within.most_common(8):
        print(f"{own[frame] / total * 100:>6.1f}{count / total * 100:>7.1f}  {frame}")
    print("  envloop's own functions, by inclusive share:")
    ours = [(frame, count) for frame, count in within.most_common() if "(envloop/" in frame]
    for frame, count in ours[: TOP + 12]:
        print(f"{own[frame] / total * 100:>6.1f}{count / total * 100:>7.1f}  {frame}")
    print("  highest self:")
    for frame, count in own.most_common(TOP):
        print(f"{count / total * 100:>6.1f}         {frame}")


def _import_times() -> None:
    """Import time of `el --help`, summed per top-level package (each module's own time)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "envloop", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    packages: collections.Counter[str] = collections.Counter()
    for line in proc.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if match:
            own_us, name = match.groups()
            top = ".".join(name.split(".")[:2]) if name.startswith("envloop.") else name.split(".")[0]
            packages[top] += int(own_us)
    total = sum(packages.values())
    print(
        f"\n`python -X importtime -m envloop --help`: {total / 1e6:.2f} s of imports; by package (own time):"
    )
    for name, micros in packages.most_common(TOP):
        print(f"{micros / 1e6:>8.3f} s {micros / total * 100:>5.1f}%  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--sandbox", choices=["plain", "bwrap"], default="plain")
    parser.add_argument("--capacity", type=int, default=4)
    parser.add_argument(
        "--py-spy", type=Path, default=Path.home() / ".cache" / "envloop-bench" / "tools" / "bin" / "py-spy"
    )
    args = parser.parse_args()
    if not args.py_spy.exists():
        parser.error(f"no py-spy at {args.py_spy} (see --help for how to install it)")
    root = Path(tempfile.mkdtemp(prefix="envloop-profile-"))
    try:
        home = root / "home"
        home.mkdir()
        env = dict(os.environ, ENVLOOP_HOME=str(home), ENVLOOP_SANDBOX=args.sandbox)
        tasks = cli_runs.trivial_tasks(root / "tasks", args.tasks)
        profile = cli_runs.profile_file(root / "true.json", cli_runs.TRUE_AGENT)
        el = cli_runs.EL
        subprocess.run([*el, "dataset", "push", str(tasks), "--name", "bench"], env=env, check=True)
        subprocess.run(
            [*el, "profile", "create", "bench/agent", "1", "--file", str(profile)], env=env, check=True
        )
        worker_command = [
            *el,
            "worker",
            "--background",
            "--idle-exit",
            "300",
            "--capacity",
            str(args.capacity),
            "--processes",
            "1",  # py-spy samples one process: the whole capacity runs in it
        ]
        worker = _record(args.py_spy, root / "worker.raw", worker_command, env)
        deadline = time.monotonic() + 180
        lock = home / "background-worker.lock"
        while not (lock.exists() and lock.read_text().strip().isdigit()) and time.monotonic() < deadline:
            time.sleep(0.01)
        worker_pid = int(lock.read_text().strip())
        submit = [*el, "job", "submit", "--dataset", "bench@1", "--profile", "bench/agent@1", "--wait"]
        start = time.perf_counter()
        follower = _record(args.py_spy, root / "follower.raw", submit, env)
        follower.wait()
        wall = time.perf_counter() - start
        os.kill(worker_pid, signal.SIGTERM)
        worker.wait()
        print(f"{args.tasks} tasks, {args.sandbox}, capacity {args.capacity}: {wall:.1f} s under py-spy")
        _summarise(root / "worker.raw", "worker (el worker --background)")
        _summarise(root / "follower.raw", "follower (el job submit --wait)")
        _import_times()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
