"""Inspect AI run as users run it: `inspect eval` from its own venv, one process per run, checked
afterwards against its own log (every sample done, the expected score)."""

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cli_runs import Usage, measured

TASKS_FILE = Path(__file__).with_name("inspect_tasks.py")

DEFAULT_LOG: tuple[str, ...] = ()
"""Inspect's defaults: the `.eval` format with every sample and its events, written as they run."""
CHEAPEST_LOG = ("--no-log-samples", "--no-log-realtime", "--no-score-display", "--log-format", "json")
"""The least logging Inspect allows: no samples, no realtime event buffer, a small JSON summary."""


@dataclass(frozen=True)
class InspectWork:
    """One kind of run: which task of `inspect_tasks.py`, with which model, logging how."""

    task: str
    model: str
    log_flags: tuple[str, ...]
    expected_accuracy: float | None
    task_args: tuple[str, ...] = ()


_SUMMARY = """
import json, sys
from inspect_ai.log import read_eval_log
log = read_eval_log(sys.argv[1], header_only=True)
scores = log.results.scores if log.results else []
values = [m.value for s in scores for name, m in s.metrics.items() if name in ("accuracy", "mean")]
accuracy = values[0] if values else None
completed = log.results.completed_samples if log.results else None
print(json.dumps({"status": log.status, "completed": completed, "accuracy": accuracy}))
"""


def _summary(python: Path, log_dir: Path) -> dict[str, object]:
    """Status, samples completed and accuracy, read by Inspect itself (its `.eval` is zstd-packed)."""
    (log,) = list(log_dir.iterdir())
    proc = subprocess.run([str(python), "-c", _SUMMARY, str(log)], capture_output=True, text=True, check=True)
    summary: dict[str, object] = json.loads(proc.stdout)
    return summary


def inspect_eval(
    python: Path,
    work: InspectWork,
    count: int,
    task_args: list[str],
    concurrency: int,
    workdir: Path,
    env_extra: dict[str, str] | None = None,
) -> Usage:
    """Run `inspect eval` on `count` samples at `concurrency`, in a fresh `workdir`.

    Concurrency is bounded by `--max-samples` (and subprocesses and connections alike), never by
    `--max-sandboxes`: with that set, Inspect sleeps a random 0-1 s before each sample.
    """
    workdir.mkdir(parents=True)
    log_dir = workdir / "logs"
    limit = str(concurrency)
    argv = [str(python.with_name("inspect")), "eval", f"{TASKS_FILE}@{work.task}", *task_args]
    argv += list(work.task_args)
    argv += ["--model", work.model, "--max-samples", limit, "--max-subprocesses", limit]
    argv += ["--max-connections", limit, "--display", "none", "--log-dir", str(log_dir)]
    argv += list(work.log_flags)
    env = dict(os.environ, **(env_extra or {}))
    used = measured(argv, env, workdir / "out", workdir / "err", cwd=workdir)
    summary = _summary(python, log_dir)
    if summary["status"] != "success" or summary["completed"] != count:
        raise RuntimeError(f"inspect eval ended {summary} on {count} samples ({workdir / 'err'})")
    if work.expected_accuracy is not None and summary["accuracy"] != work.expected_accuracy:
        raise RuntimeError(f"inspect eval scored {summary['accuracy']}, expected {work.expected_accuracy}")
    return used
