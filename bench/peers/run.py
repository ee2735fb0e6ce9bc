"""envloop beside Inspect AI on the same work, interleaved in one run, at equal concurrency.

    .venv/bin/python bench/peers/run.py [--tasks 1000] [--concurrency 4] [--rounds 3]
                                        [--workloads w1,w2,startup] [--envloop-only] [--one-process]
                                        [--dir DIR]

W1: N distinct sandboxed trivial tasks (agent `true`, a verifier that yields 1). envloop through
its CLI on a fresh home (`el dataset push`, `el profile create`, `el job submit --wait`) in
bubblewrap and plain; Inspect's local sandbox with `mockllm`; and the bare floor: the same processes
spawned directly and inside bwrap. W2: N prompts scored by exact match; `envloop/chat@1` and
Inspect's OpenAI-compatible provider against the same scripted endpoint (`python -m
envloop.testing`), and Inspect's in-process `mockllm`. Inspect runs with its default log and its
cheapest. Start-up: a one-task run end to end, cold, and envloop's quick commands.

Each round runs every variant once on 1 task and once on N (or twice, for envloop's W2), envloop and
Inspect alternating, so other load on the machine hits both alike. Marginal figures per trial are
(run of N - run of 1) / (N - 1) within a round; the table shows the median over rounds. Inspect is
installed by `bench/peers/setup_inspect.py` into a venv of its own (never envloop's); with
`--envloop-only` it is not run at all, and the output says so. With `--one-process`, envloop's
variants also run with their worker in a single process (by default it is one per core), so the run
shows what the extra processes bring; the peak memory column is the largest single process.

On an ext4 without a journal, start a run several minutes after any large deletion (a test suite,
an earlier run's clean-up, which this bench's own is): for minutes after it every file a trial
makes costs more, and envloop's trials make files where the floor's make none (BENCHMARKS.md,
7 December).
"""

import argparse
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))  # the helpers shared with bench/trials.py

import cli_runs  # noqa: E402
import floors  # noqa: E402
from inspect_side import CHEAPEST_LOG, DEFAULT_LOG, InspectWork, inspect_eval  # noqa: E402
from setup_inspect import default_venv, ensure_inspect_venv  # noqa: E402

ONE = "one worker process"
TARGETS_SEC = {"el --help": 0.3, "el job get": 0.3, "el job result": 0.5, "one-task run": 1.5}


@dataclass(eq=False)  # one object per row, told apart by identity
class Variant:
    """One row of the report: a tool on one workload, and how to run it on n tasks in a directory."""

    workload: str
    label: str
    run: Callable[[int], cli_runs.Usage]
    samples: list[tuple[cli_runs.Usage, cli_runs.Usage]] = field(default_factory=list)
    floor: bool = False
    failures: list[str] = field(default_factory=list)

    def marginal(self, n: int) -> tuple[float, float, float]:
        """Median over rounds of the marginal wall, CPU and machine CPU milliseconds per trial."""
        walls = [(big.wall - small.wall) / (n - 1) * 1000 for small, big in self.samples]
        cpus = [(big.cpu - small.cpu) / (n - 1) * 1000 for small, big in self.samples]
        machine = [(big.machine_cpu - small.machine_cpu) / (n - 1) * 1000 for small, big in self.samples]
        if self.floor:  # nothing to subtract: no start-up, the N spawns alone
            walls = [big.wall / n * 1000 for _, big in self.samples]
            cpus = [big.cpu / n * 1000 for _, big in self.samples]
            machine = [big.machine_cpu / n * 1000 for _, big in self.samples]
        return statistics.median(walls), statistics.median(cpus), statistics.median(machine)


class Bench:
    def __init__(self, args: argparse.Namespace, root: Path, python: Path | None) -> None:
        self.args, self.root, self.python = args, root, python
        self.runs = 0
        self.sources: dict[tuple[str, int], Path] = {}
        self.endpoint: subprocess.Popen[str] | None = None
        self.url = ""

    def fresh(self, tag: str) -> Path:
        self.runs += 1
        return self.root / "runs" / f"{self.runs:04d}-{tag}"

    def tasks(self, n: int) -> Path:
        key = ("tasks", n)
        if key not in self.sources:
            self.sources[key] = cli_runs.trivial_tasks(self.root / f"tasks-{n}", n)
        return self.sources[key]

    def rows(self, n: int) -> Path:
        key = ("rows", n)
        if key not in self.sources:
            path = self.root / f"rows-{n}.jsonl"
            path.write_text("".join(_row_line(i) for i in range(n)))
            self.sources[key] = path
        return self.sources[key]

    def start_endpoint(self) -> None:
        answers = self.rows(self.args.tasks)  # row i is the same in every size: all are answered
        command = [sys.executable, "-m", "envloop.testing", "--answers", str(answers)]
        self.endpoint = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self.endpoint.stdout is not None
        self.url = self.endpoint.stdout.readline().strip()

    def envloop_w1(self, sandbox: str, processes: str | None = None) -> Callable[[int], cli_runs.Usage]:
        def run(n: int) -> cli_runs.Usage:
            profile = cli_runs.profile_file(self.root / "true.json", cli_runs.TRUE_AGENT)
            home = self.fresh(f"el-{sandbox}-{n}")
            env = {"ENVLOOP_SANDBOX": sandbox} | _processes_env(processes)
            done = cli_runs.job_through_cli(
                home, self.tasks(n), profile, capacity=self.args.concurrency, env_extra=env
            )
            return done.run

        return run

    def envloop_w2(self, processes: str | None = None) -> Callable[[int], cli_runs.Usage]:
        def run(n: int) -> cli_runs.Usage:
            params = cli_runs.chat_params(self.url + "/v1", self.args.concurrency)
            profile = cli_runs.profile_file(self.root / "chat.json", params, secret=("MODEL_API_KEY",))
            home = self.fresh(f"el-chat-{n}")
            done = cli_runs.job_through_cli(
                home,
                self.rows(n),
                profile,
                capacity=self.args.concurrency,
                env_extra=_processes_env(processes),
                push_args=("--scorer", "exact"),
            )
            return done.run

        return run

    def inspect(self, work: InspectWork) -> Callable[[int], cli_runs.Usage]:
        def run(n: int) -> cli_runs.Usage:
            assert self.python is not None
            task_arg = f"tasks={n}" if work.task == "sandboxed" else f"rows={self.rows(n)}"
            env = {"SCRIPTED_BASE_URL": self.url + "/v1", "SCRIPTED_API_KEY": "bench-key"}
            workdir = self.fresh(f"inspect-{work.task}-{n}")
            return inspect_eval(self.python, work, n, ["-T", task_arg], self.args.concurrency, workdir, env)

        return run

    def floor(self, sandbox: str) -> Callable[[int], cli_runs.Usage]:
        def run(n: int) -> cli_runs.Usage:
            wall, cpu = floors.run_floor(n, self.args.concurrency, sandbox, self.fresh(f"floor-{sandbox}"))
            return cli_runs.Usage(wall, cpu, 0.0)

        return run


def _processes_env(processes: str | None) -> dict[str, str]:
    """The background worker's process count (`ENVLOOP_WORKER_PROCESSES`); None: its default."""
    return {} if processes is None else {"ENVLOOP_WORKER_PROCESSES": processes}


def _row_line(i: int) -> str:
    return f'{{"id": "q{i}", "prompt": "q: {i} + {i}?", "answer": "{2 * i}"}}\n'


def _variants(bench: Bench, workloads: set[str], with_inspect: bool) -> list[Variant]:
    """In run order: envloop and Inspect alternate within each workload."""
    local = "local sandbox, mockllm"
    openai_api = "openai-api/scripted/bench-model"
    w1_default = InspectWork("sandboxed", "mockllm/model", DEFAULT_LOG, 1.0)
    w1_cheap = InspectWork("sandboxed", "mockllm/model", CHEAPEST_LOG, 1.0)
    single = bench.args.one_process
    out: list[Variant] = []
    if "w1" in workloads:
        out.append(Variant("W1", "envloop, bubblewrap", bench.envloop_w1("bwrap")))
        if with_inspect:
            out.append(Variant("W1", f"Inspect {local}, default log", bench.inspect(w1_default)))
        if single:
            out.append(Variant("W1", f"envloop, bubblewrap, {ONE}", bench.envloop_w1("bwrap", "1")))
        out.append(Variant("W1", "envloop, plain", bench.envloop_w1("plain")))
        if with_inspect:
            out.append(Variant("W1", f"Inspect {local}, cheapest log", bench.inspect(w1_cheap)))
        if single:
            out.append(Variant("W1", f"envloop, plain, {ONE}", bench.envloop_w1("plain", "1")))
        out.append(Variant("W1", "floor: processes directly", bench.floor("plain"), floor=True))
        out.append(Variant("W1", "floor: processes in bwrap", bench.floor("bwrap"), floor=True))
    if "w2" in workloads:
        same, mock = "Inspect openai-api, same endpoint", "Inspect mockllm in-process"
        in_process = ("-T", "mock=true")
        inspect_w2 = [
            (f"{same}, cheapest log", InspectWork("prompts", openai_api, CHEAPEST_LOG, 1.0)),
            (f"{same}, default log", InspectWork("prompts", openai_api, DEFAULT_LOG, 1.0)),
            (f"{mock}, cheapest log", InspectWork("prompts", "mockllm/model", CHEAPEST_LOG, 1.0, in_process)),
            (f"{mock}, default log", InspectWork("prompts", "mockllm/model", DEFAULT_LOG, 1.0, in_process)),
        ]
        envloop = Variant("W2", "envloop/chat@1, scripted endpoint", bench.envloop_w2())
        one = Variant("W2", f"envloop/chat@1, scripted endpoint, {ONE}", bench.envloop_w2("1"))
        out.append(envloop)
        for number, (label, work) in enumerate(inspect_w2 if with_inspect else []):
            out.append(Variant("W2", label, bench.inspect(work)))
            if number == 0 and single:
                out.append(one)
            if number == 1:
                out.append(envloop)  # the second of its two runs this round, between Inspect's
        if single and not with_inspect:
            out.append(one)
    return out


def _flushed(run: Callable[[int], cli_runs.Usage], n: int) -> cli_runs.Usage:
    """One run, started once the writes of the runs before it are on disk: otherwise the kernel
    writes them back during this one, on the same two cores, and a tool pays for its predecessor's
    logs (Inspect's default log, envloop's trial files). The machine's CPU over the run is kept
    beside the processes' own."""
    os.sync()
    before = cli_runs.machine_busy_sec()
    used = run(n)
    machine = cli_runs.machine_busy_sec() - before
    cli_runs.reap_orphans()  # a floor's or Inspect's sandboxes leave theirs to this process too
    return dataclasses.replace(used, machine_cpu=machine)


def _round(variants: list[Variant], n: int) -> None:
    for variant in variants:
        try:
            small, big = _flushed(variant.run, 1), _flushed(variant.run, n)
        except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
            variant.failures.append(str(exc))
            print(f"  {variant.workload} {variant.label}: FAILED: {exc}")
            continue
        variant.samples.append((small, big))
        wall, cpu = ((big.wall - small.wall) / (n - 1) * 1000, (big.cpu - small.cpu) / (n - 1) * 1000)
        figures = f"{big.wall:.1f} s for {n}, {small.wall:.2f} s for 1: {wall:.2f} wall, {cpu:.2f} cpu ms"
        if big.follower_cpu:
            figures += f" (el job submit --wait: {big.follower_cpu / big.cpu * 100:.0f}% of the cpu)"
        print(f"  {variant.workload} {variant.label}: {figures}")
        sys.stdout.flush()


def _startup_round(bench: Bench, with_inspect: bool, into: dict[str, list[float]]) -> None:
    profile = cli_runs.profile_file(bench.root / "true.json", cli_runs.TRUE_AGENT)
    home = bench.fresh("el-startup")
    done = cli_runs.job_through_cli(home, bench.tasks(1), profile, capacity=None)
    into.setdefault("one-task run", []).append(done.run.wall)
    into.setdefault("one-task run: el follower cpu", []).append(done.follower.cpu)
    job = cli_runs.last_job_id(home)
    into.setdefault("el --help", []).append(cli_runs.quick_command(home, ["--help"]))
    into.setdefault("el job get", []).append(cli_runs.quick_command(home, ["job", "get", job]))
    into.setdefault("el job result", []).append(cli_runs.quick_command(home, ["job", "result", job]))
    if with_inspect:
        run = bench.inspect(InspectWork("sandboxed", "mockllm/model", DEFAULT_LOG, 1.0))
        into.setdefault("Inspect one-task run (default log)", []).append(run(1).wall)


def _report(variants: list[Variant], n: int, startup: dict[str, list[float]]) -> None:
    unique = list(dict.fromkeys(variants))
    rounds = len(unique[0].samples) if unique else 0
    print(f"\nmedians of {rounds} samples; marginal per trial = (run of N - run of 1) / (N - 1)")
    header = f"{'':<52}{'wall ms':>9}{'cpu ms':>9}{'machine':>9}{'1-task s':>10}{'peak MiB':>10}"
    marginals = {v.label: v.marginal(n) for v in unique if v.samples}
    for workload in ("W1", "W2"):
        rows = [v for v in unique if v.workload == workload and v.samples]
        if not rows:
            continue
        print(f"\n{workload}, per trial ({n} trials){header[len(workload) + 22 :]}")
        for v in rows:
            wall, cpu, machine = marginals[v.label]
            fixed = statistics.median(s.wall for s, _ in v.samples)
            peak = max(b.rss_mib for _, b in v.samples)
            fixed_text = "" if v.floor else f"{fixed:>10.2f}"
            print(f"{v.label:<52}{wall:>9.2f}{cpu:>9.2f}{machine:>9.2f}{fixed_text:>10}{peak:>10.0f}")
    print(
        "cpu: the tool's processes and the children they waited for; machine: all CPU the machine "
        "spent meanwhile, which also holds what no one waits for (bwrap's sandboxed child) and other load"
    )
    _ratios(marginals)
    for label, values in startup.items():
        median, target = statistics.median(values), TARGETS_SEC.get(label)
        met = "met" if target is not None and median <= target else "NOT met"
        verdict = "" if target is None else f" (target ≤ {target} s: {met})"
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"start-up, {label}: median {median:.2f} s [{shown}]{verdict}")


def _ratios(marginals: dict[str, tuple[float, float, float]]) -> None:
    checks = [
        ("envloop, plain", "Inspect local sandbox, mockllm, cheapest log", 1 / 3),
        ("envloop, plain", "Inspect local sandbox, mockllm, default log", 1 / 3),
        ("envloop, plain", "floor: processes directly", 2.0),
        ("envloop, bubblewrap", "floor: processes in bwrap", 2.0),
        ("envloop, bubblewrap", "Inspect local sandbox, mockllm, cheapest log", None),
        ("envloop/chat@1, scripted endpoint", "Inspect openai-api, same endpoint, cheapest log", 1 / 3),
        ("envloop/chat@1, scripted endpoint", "Inspect openai-api, same endpoint, default log", 1 / 3),
        ("envloop/chat@1, scripted endpoint", "Inspect mockllm in-process, cheapest log", None),
    ]
    print("\nratios of marginal wall per trial (cpu, machine cpu in brackets)")
    for mine, theirs, target in checks:
        if mine not in marginals or theirs not in marginals:
            continue
        # The machine's CPU is counted in ticks (10 ms here): a tiny run may show none at all.
        wall, cpu, machine = (
            f"{m / t:.2f}×" if t else "n/a" for m, t in zip(marginals[mine], marginals[theirs], strict=True)
        )
        within = target is not None and marginals[mine][0] <= target * marginals[theirs][0]
        met = "met" if within else "NOT met"
        verdict = "" if target is None else f"   target ≤ {target:.2f}: {met}"
        print(f"  {mine} / {theirs}: {wall} ({cpu}, {machine}){verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=1000, help="N: tasks (W1) and prompts (W2)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", default="w1,w2,startup")
    parser.add_argument("--envloop-only", action="store_true", help="do not install or run Inspect")
    parser.add_argument(
        "--one-process",
        action="store_true",
        help="also run envloop's variants with the worker in one process (ENVLOOP_WORKER_PROCESSES=1)",
    )
    parser.add_argument("--inspect-venv", type=Path, default=default_venv())
    parser.add_argument("--dir", type=Path, default=None, help="parent of the run's files")
    args = parser.parse_args()
    # As a user's shell runs `el`: with its bytecode cached (a variable set in some shells stops that).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    workloads = set(args.workloads.split(","))
    if args.tasks < 2:
        parser.error("--tasks must be at least 2 (the marginal cost subtracts a one-task run)")
    python = None if args.envloop_only else ensure_inspect_venv(args.inspect_venv)
    cli_runs.become_subreaper()
    root = Path(tempfile.mkdtemp(prefix="envloop-peers-", dir=args.dir))
    bench = Bench(args, root, python)
    peers = f"Inspect AI from {args.inspect_venv}" if python else "Inspect AI NOT RUN (--envloop-only)"
    print(f"{args.tasks} tasks, concurrency {args.concurrency}, {os.cpu_count()} cores, {peers}")
    print(f"load average at the start: {os.getloadavg()[0]:.2f} (the machine is shared)")
    started = time.monotonic()
    try:
        if "w2" in workloads:
            bench.start_endpoint()
        variants = _variants(bench, workloads, python is not None)
        startup: dict[str, list[float]] = {}
        for number in range(args.rounds):
            print(f"round {number + 1} of {args.rounds}")
            _round(variants, args.tasks)
            if "startup" in workloads:
                _startup_round(bench, python is not None, startup)
        _report(variants, args.tasks, startup)
        failed = [v for v in dict.fromkeys(variants) if v.failures]
        for variant in failed:
            print(f"FAILED {len(variant.failures)} time(s): {variant.workload} {variant.label}")
        minutes = (time.monotonic() - started) / 60
        print(f"\nload average at the end: {os.getloadavg()[0]:.2f}; {minutes:.1f} min in all")
        if failed:
            sys.exit(1)
    finally:
        if bench.endpoint is not None:
            bench.endpoint.terminate()
            bench.endpoint.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
