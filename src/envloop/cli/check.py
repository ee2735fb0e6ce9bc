"""`el dataset check DATASET@N`: run the dataset's health check as a job, follow it, and print one
verdict per task; exit 1 when any task is unhealthy (docs/reference/exit-codes.md)."""

from typing import TYPE_CHECKING, Annotated

import typer

from envloop.cli.backend import embedded, remote
from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, note, out, table
from envloop.core.display import format_duration
from envloop.core.trial import MAX_VERIFIER_RUNS
from envloop.core.words import plural

if TYPE_CHECKING:
    from envloop.core.dataset_health import DatasetHealth

UNHEALTHY = 1
"""The exit code when a task is unhealthy (or the check could not finish), as `el dataset build`'s
when an image failed to build."""


def check(
    ref: Annotated[str, typer.Argument(help="NAME@N or NAME@latest.")],
    attempts: Annotated[
        int, typer.Option("--attempts", min=1, help="Runs of the oracle (and of the nop agent) per task.")
    ] = 3,
    environment: Annotated[
        str | None,
        typer.Option("--environment", help="local or docker (or auto); default: each worker's own choice."),
    ] = None,
    verifier_runs: Annotated[
        int,
        typer.Option(
            "--verifier-runs",
            min=1,
            max=MAX_VERIFIER_RUNS,
            help="Times the verifier judges each of the oracle's final states (differing verdicts: flaky).",
        ),
    ] = 3,
    json_: JsonOpt = False,
) -> None:
    """Whether every task can be solved (its oracle passes in each of --attempts runs), cannot be
    passed by doing nothing (the nop agent scores 0) and gets the same verdict for the same final
    state (the verifier judges each of the oracle's final states --verifier-runs times); run as a job
    tagged health-check=NAME@N. Exit 1 when any task is unhealthy."""
    from envloop.cli.progress import follow  # noqa: PLC0415 - the progress bar, only when checking

    ops = remote() or embedded(run_trials=True)
    submitted = ops.check_dataset(ref, attempts, environment, verifier_runs)
    job = submitted.job
    note(f"checking {job.dataset} as job {job.id}: {plural(sum(job.counts.values()), 'trial')}")
    follow(ops, job.id)
    health = ops.get_dataset_check(job.id)
    if json_:
        emit_json(health)
    else:
        print_health(health)
    if not health.healthy:
        raise typer.Exit(UNHEALTHY)


def print_health(health: "DatasetHealth") -> None:
    """The check's table: one row per task, its verdict (healthy, or each problem named) and times."""
    rows = [
        [
            task.task,
            _verdict(task.healthy, task.pending, task.problems),
            _rewards(task.oracle),
            _rewards(task.nop),
            format_duration(task.setup_sec),
            format_duration(task.oracle_sec),
            format_duration(task.verifier_sec),
        ]
        for task in health.tasks
    ]
    out.print(table(["task", "verdict", "oracle", "nop", "setup", "oracle time", "verifier"], rows))
    healthy = sum(task.healthy for task in health.tasks)
    where = f"the {health.environment}" if health.environment else "each worker's"
    state = "" if health.finished else f" (job {health.status}: not final)"
    out.print(
        f"{healthy} of {plural(len(health.tasks), 'task')} healthy, {plural(health.attempts, 'attempt')} "
        f"each in {where} environment; job {health.job_id}{state}",
        markup=False,
        highlight=False,
    )


def _verdict(healthy: bool, pending: bool, problems: list[str]) -> str:
    if problems:
        return "; ".join(problems)
    return "still running" if pending else "healthy" if healthy else "no runs"


def _rewards(rewards: list[float | None]) -> str:
    return " ".join("-" if reward is None else f"{reward:g}" for reward in rewards)
