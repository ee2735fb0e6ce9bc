"""`el trial list|get|logs|artifacts|invalidate`."""

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from envloop.cli.backend import operations
from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, note, out, table, when
from envloop.core.destinations import MAX_DESTINATIONS, Destinations
from envloop.core.display import format_score
from envloop.core.status import Phase, TrialStatus
from envloop.core.structured import describe_reading
from envloop.core.trajectory import Step, Trajectory
from envloop.core.words import plural
from envloop.errors import NotFoundError, UserError
from envloop.operations import Operations
from envloop.trajectories.atif import atif_chunks
from envloop.trajectories.render import describe_end, describe_step
from envloop.wire import LOG_FILES, LOG_PAGE_BYTES, LogPhase, TrialView

app = typer.Typer(help="Single attempts: status, reward, logs, artifacts.", no_args_is_help=True)
FLAG_PATHS_SHOWN = 10
"""A flag's paths printed by `el trial get`; `--json` has them all."""


@app.command("list")
def list_(
    job: Annotated[str, typer.Option("--job", help="Job ID.")],
    status: Annotated[
        TrialStatus | None, typer.Option("--status", help="Only trials with this status.")
    ] = None,
    task: Annotated[str | None, typer.Option("--task", help="Only this task.")] = None,
    json_: JsonOpt = False,
) -> None:
    """A job's trials."""
    views = operations().list_trials(job, status=status, task=task)
    if json_:
        emit_json(views)
        return
    out.print(
        table(
            ["trial", "profile", "task", "#", "status", "reward", "error"],
            [
                [
                    v.id,
                    v.profile,
                    v.task,
                    v.attempt,
                    v.status + (" (invalidated)" if v.invalidated else ""),
                    format_score(v.reward) if v.reward is not None else (v.reward_note and "none"),
                    v.error_type,
                ]
                for v in views
            ],
        )
    )


@app.command()
def get(
    trial_id: str,
    steps: Annotated[
        bool, typer.Option("--steps", help="Also print the trajectory: model calls, tool calls, results.")
    ] = False,
    format_: Annotated[
        str,
        typer.Option(
            "--format",
            help="With --steps: envloop (the default) or atif (Harbor's Agent Trajectory Interchange "
            "Format, printed as JSON).",
        ),
    ] = "envloop",
    json_: JsonOpt = False,
) -> None:
    """One trial: status, error and exit code, reward, phases, sandbox (and with --steps, its trajectory)."""
    if format_ not in ("envloop", "atif"):
        raise UserError(f"unknown --format {format_!r}: envloop or atif")
    if format_ == "atif" and not steps:
        raise UserError("--format atif exports the trajectory: add --steps")
    ops = operations()
    v = ops.get_trial(trial_id)
    paged = _paged(ops, trial_id) if steps else None
    if format_ == "atif":
        atif = atif_chunks(*paged) if paged else iter(["null"])  # null when no trajectory was kept
        _write_json(atif, v if json_ else None)
        return
    if json_:
        if not steps:
            emit_json(v)
            return
        _write_json(_trajectory_chunks(*paged) if paged else iter(["null"]), v)
        return
    out.print(f"{v.id}  {v.status}  {v.task} attempt {v.attempt}  profile {v.profile}  job {v.job_id}")
    if v.error_type:
        out.print(f"error {v.error_type}: {v.error_message} (exit code {v.exit_code})")
    reward = format_score(v.reward) if v.reward is not None else f"none ({v.reward_note})"
    out.print(
        f"reward {reward}"
        + ("  [invalidated: " + (v.invalidated_reason or "") + "]" if v.invalidated else "")
    )
    if v.dimensions:
        out.print("dimensions " + ", ".join(f"{k}={val:g}" for k, val in v.dimensions.items()))
    for line in describe_reading(v.structured) if v.structured else []:
        out.print(line)
    out.print(f"sandbox {v.sandbox or '—'}" + (f" ({v.sandbox_note})" if v.sandbox_note else ""))
    for w in v.warnings:
        out.print(f"warning: {w}")
    for flag in v.flags:
        shown = ", ".join(flag.paths[:FLAG_PATHS_SHOWN])
        more = f" and {len(flag.paths) - FLAG_PATHS_SHOWN} more" if len(flag.paths) > FLAG_PATHS_SHOWN else ""
        out.print(f"flag {flag.kind}: {flag.detail}" + (f": {shown}{more}" if shown else ""), markup=False)
    for line in _destination_lines(v.destinations):
        out.print(line, markup=False)
    out.print(
        table(
            ["phase", "started", "ended", "exit", "timed out"],
            [
                [p["name"], p["started_at"], p["ended_at"], p.get("exit_code"), p.get("timed_out")]
                for p in v.phases
            ],
        )
    )
    out.print(f"runs {v.runs}  created {when(v.created_at)}  finished {when(v.finished_at)}")
    if steps:
        if paged is None:
            out.print("no trajectory was kept for this trial")
            return
        head, read = paged
        for step in read:
            for line in describe_step(step):
                out.print(line, markup=False)
        out.print(describe_end(head), markup=False)


def _destination_lines(destinations: Destinations | None) -> list[str]:
    """What the trial asked its egress proxy for or looked up itself: each destination that
    failed, the first others."""
    if destinations is None:
        return []
    if not destinations.listed and not destinations.more_destinations:
        return ["destinations: none asked for through the trial's proxy or looked up directly"]
    lines = [f"destination {one.label()}: {one.summary()}" for one in destinations.shown()]
    if unshown := destinations.unshown():
        lines.append(f"and {plural(unshown, 'more destination')} (--json lists up to {MAX_DESTINATIONS})")
    return lines


def _paged(ops: Operations, trial_id: str) -> tuple[Trajectory, Iterator[Step]] | None:
    """The trajectory's other fields and its steps, read a page at a time; None when none was kept."""
    try:
        first = ops.trial_step_page(trial_id)
    except NotFoundError:
        return None

    def steps() -> Iterator[Step]:
        page = first
        yield from page.steps
        while page.next_offset is not None:
            page = ops.trial_step_page(trial_id, page.next_offset)
            yield from page.steps

    return first.trajectory, steps()


def _trajectory_chunks(head: Trajectory, steps: Iterator[Step]) -> Iterator[str]:
    """The trajectory as JSON text, a step at a time."""
    opening = head.model_dump_json(exclude={"steps"})
    yield opening[:-1] + ', "steps": ['
    for number, step in enumerate(steps):
        yield ("," if number else "") + step.model_dump_json()
    yield "]}"


def _write_json(trajectory: Iterator[str], view: TrialView | None) -> None:
    """The trajectory JSON streamed to stdout, inside the trial's own JSON when `view` is given."""
    if view is not None:
        sys.stdout.write(json.dumps(view.model_dump(mode="json"))[:-1] + ', "trajectory": ')
    for chunk in trajectory:
        sys.stdout.write(chunk)
    sys.stdout.write(("}" if view is not None else "") + "\n")
    sys.stdout.flush()


@app.command()
def logs(
    trial_id: str,
    phase: Annotated[
        LogPhase, typer.Option("--phase", help="Whose output: artifacts is the artifact collection's.")
    ] = Phase.AGENT,
    offset: Annotated[
        int, typer.Option("--offset", min=0, help="With --json: first byte of each stream.")
    ] = 0,
    limit: Annotated[
        int, typer.Option("--limit", min=1, help="With --json: most bytes of each stream (at most 1 MiB).")
    ] = LOG_PAGE_BYTES,
    json_: JsonOpt = False,
) -> None:
    """The captured output of one phase: setup, agent (the default), verifier or artifacts.

    The text is streamed whole, however long; --json gives one page of each stream."""
    ops = operations()
    if json_:
        emit_json(ops.trial_logs(trial_id, phase, offset, limit))
        return
    kept = {item.path for item in ops.list_artifacts(trial_id)}
    for rel in LOG_FILES[phase]:
        if rel not in kept:
            continue
        note(f"--- {phase} {Path(rel).stem} ---")
        last = b"\n"
        for chunk in ops.read_artifact(trial_id, rel):
            sys.stdout.buffer.write(chunk)
            last = chunk[-1:] or last
        if last != b"\n":
            sys.stdout.buffer.write(b"\n")
        sys.stdout.buffer.flush()


@app.command()
def artifacts(
    trial_id: str,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Copy the artifacts into this folder.")
    ] = None,
    json_: JsonOpt = False,
) -> None:
    """List a trial's kept files, or copy them out."""
    ops = operations()
    items = ops.copy_artifacts(trial_id, output) if output else ops.list_artifacts(trial_id)
    if json_:
        emit_json(items)
        return
    if output:
        note(f"copied {plural(len(items), 'file')} to {output}")
    out.print(table(["path", "bytes"], [[i.path, i.size] for i in items]))


@app.command()
def invalidate(
    trial_id: str,
    reason: Annotated[str | None, typer.Option("--reason", help="Why this trial must not count.")] = None,
    undo: Annotated[bool, typer.Option("--undo", help="Count the trial again.")] = False,
    json_: JsonOpt = False,
) -> None:
    """Exclude a trial's reward from every aggregate, keeping its record (or undo that)."""
    v = operations().invalidate_trial(trial_id, reason, undo=undo)
    if json_:
        emit_json(v)
        return
    out.print(f"{v.id} {'invalidated' if v.invalidated else 'counted again'}")
