"""The peers benchmark and the trials benchmark run end to end on envloop's side (tiny sizes here,
and two trials at once, so each background worker is one process; the real figures come from
running them). Inspect is never installed here: `--envloop-only` says so in the output rather than
skipping it silently."""

import subprocess
import sys

import pytest

from tests.conftest import REPO

# Beside the other test processes a benchmark's many processes take longer than the 300 s every
# test gets; their sizes are already the smallest that print every row.
pytestmark = pytest.mark.timeout(900)


def _bench(script: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.slow
def test_the_peers_benchmark_prints_envloops_figures_and_says_inspect_did_not_run() -> None:
    out = _bench(
        "peers/run.py",
        *("--tasks", "2", "--rounds", "1", "--concurrency", "2", "--envloop-only", "--one-process"),
    )
    assert "Inspect AI NOT RUN (--envloop-only)" in out
    assert "FAILED" not in out
    for row in (
        "envloop, bubblewrap",
        "envloop, plain",
        "envloop, plain, one worker process",
        "envloop, bubblewrap, one worker process",
        "envloop/chat@1, scripted endpoint, one worker process",
        "floor: processes directly",
        "floor: processes in bwrap",
        "envloop/chat@1, scripted endpoint",
        "start-up, one-task run: median",
        "start-up, el --help: median",
        "start-up, el job result: median",
        "ratios of marginal wall per trial",
        "envloop, plain / floor: processes directly",
    ):
        assert row in out, row
    assert "Inspect openai-api" not in out
    # Each W1 row has a machine CPU figure beside its own: bwrap's sandboxed child is in no rusage.
    bwrap_floor = next(line for line in out.splitlines() if line.startswith("floor: processes in bwrap"))
    wall, cpu, machine = (float(value) for value in bwrap_floor.split()[-4:-1])
    assert wall > 0 and cpu > 0 and machine >= 0, bwrap_floor  # ticks of 10 ms: a tiny run may show none


@pytest.mark.slow
def test_the_trials_benchmark_prints_the_cli_figure_beside_the_in_process_one_and_the_floors() -> None:
    out = _bench(
        "trials.py",
        *("--trials", "2", "--capacity", "2", "--rounds", "2", "--warm-up", "1", "--one-trial-runs", "1"),
    )
    assert "CLI, distinct tasks" in out and "in-process, 1 task" in out
    assert "CLI × floor" in out
    for mode in ("plain", "bwrap"):
        rounds = [line.split()[0] for line in out.splitlines() if line.split()[1:2] == [mode]]
        assert rounds == ["1", "2"], (mode, out)
        assert f"median of 2 rounds, {mode}: CLI " in out
    assert "one-trial job end to end" in out


@pytest.mark.slow
def test_the_pending_benchmark_prints_each_size_per_round_and_the_medians() -> None:
    out = _bench("pending.py", "--sizes", "2,4", "--tasks", "2", "--run", "2", "--rounds", "2")
    for size in ("2", "4"):
        rows = [line for line in out.splitlines() if line.startswith("round") and f" {size} pending" in line]
        assert len(rows) == 2, out
        assert all("ms CPU per trial" in row and "RSS" in row for row in rows), rows
    assert out.count("median of 2 rounds:") == 2, out
