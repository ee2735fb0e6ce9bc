"""`el job submit|get|list|cancel|export|watch|share|shares|unshare`."""

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from envloop.cli import exits
from envloop.cli.backend import embedded, operations, remote
from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, note, out, table, warn, when
from envloop.cli.serve import DEFAULT_URL, served_address
from envloop.core.capacity import CAPACITY_ENV
from envloop.core.status import TERMINAL, JobStatus, TrialStatus
from envloop.core.words import plural
from envloop.errors import UserError
from envloop.home import envloop_home
from envloop.settings import settings

if TYPE_CHECKING:
    from envloop.wire import JobRequest, JobView, ShareView

app = typer.Typer(help="Evaluation jobs: a dataset revision x profiles x attempts.", no_args_is_help=True)


def _tags(values: list[str]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise UserError(f"invalid tag {value!r}: expected key=value")
        tags[key] = val
    return tags


def _finished(counts: dict[TrialStatus, int]) -> int:
    return sum(counts[status] for status in TERMINAL)


@app.command()
def submit(
    dataset: Annotated[str | None, typer.Option("--dataset", help="NAME@N or NAME@latest.")] = None,
    profile: Annotated[list[str] | None, typer.Option("--profile", help="NAME@VERSION (repeatable).")] = None,
    attempts: Annotated[int | None, typer.Option("--attempts", help="Attempts per task (k).")] = None,
    task: Annotated[
        list[str] | None, typer.Option("--task", help="Run only these tasks (repeatable).")
    ] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="Agent step limit.")] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", help="Trials of this job at once.")
    ] = None,
    capacity: Annotated[
        int | None,
        typer.Option(
            "--capacity",
            min=1,
            envvar=CAPACITY_ENV,
            help="Trials at once for the background worker this command starts (default: the job's "
            "--concurrency if higher than max(2, cores), else max(2, cores)); a worker already running "
            "keeps its own.",
        ),
    ] = None,
    agent_timeout: Annotated[
        float | None, typer.Option("--agent-timeout", help="Seconds; overrides task.toml.")
    ] = None,
    verifier_timeout: Annotated[
        float | None, typer.Option("--verifier-timeout", help="Seconds; overrides task.toml.")
    ] = None,
    agent_setup_timeout: Annotated[
        float | None,
        typer.Option(
            "--agent-setup-timeout",
            help="Seconds for installing the agent, a phase before the agent's own (its time is never "
            "the agent's). Default 360, as Harbor's.",
        ),
    ] = None,
    environment: Annotated[
        str | None,
        typer.Option(
            "--environment",
            help="Where Harbor tasks run: local (this host's sandbox), docker (a container of the task's "
            "image) or auto (docker when the Dockerfile needs it and a daemon answers). Default: the "
            "worker's choice, local unless it was started otherwise.",
        ),
    ] = None,
    skip_unsupported: Annotated[
        bool,
        typer.Option(
            "--skip-unsupported",
            help="Run the other tasks when some need a feature the environment cannot honour (GPUs, "
            "compose sidecars, …): the job records the tasks it left out and why. Without it such a "
            "job is refused.",
        ),
    ] = False,
    verifier_environment: Annotated[
        str | None,
        typer.Option(
            "--verifier-environment",
            help="task (default): each verifier runs where its task says. separate: every verifier runs "
            "in a fresh container of the task's image with only the working directory and declared "
            "artifacts carried over, so nothing else the agent changed can touch it.",
        ),
    ] = None,
    request_id: Annotated[
        str | None, typer.Option("--request-id", help="Makes submission idempotent.")
    ] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="key=value (repeatable).")] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="What to call the run in lists (one line).")
    ] = None,
    note_: Annotated[str | None, typer.Option("--note", help="Why the run was made or what changed.")] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="A file written by `el job export`.")
    ] = None,
    wait: Annotated[
        bool,
        typer.Option("--wait", help="Follow the job to its end; exit code 3 if it ends failed or cancelled."),
    ] = False,
    json_: JsonOpt = False,
) -> None:
    """Validate everything, create all trials pending, and start execution."""
    overrides: dict[str, object] = {
        "dataset": dataset,
        "profiles": profile or None,
        "attempts": attempts,
        "tasks": task or None,
        "max_steps": max_steps,
        "concurrency": concurrency,
        "agent_timeout_sec": agent_timeout,
        "verifier_timeout_sec": verifier_timeout,
        "agent_setup_timeout_sec": agent_setup_timeout,
        "environment": environment,
        "skip_unsupported": skip_unsupported or None,
        "verifier_environment": verifier_environment,
        "request_id": request_id,
        "tags": _tags(tag) if tag else None,
        "name": name,
        "note": note_,
    }
    request = _job_request(config, overrides)
    # Embedded, the client starts a background worker for the job (stopped again if it is refused).
    local = embedded(run_trials=True, capacity=capacity) if remote() is None else None
    ops = local if local is not None else operations()
    submitted = ops.submit_job(request)
    for message in submitted.warnings:
        warn(message)
    job = submitted.job
    if local is not None and local.left_to_running_worker and capacity is not None:
        note("a background worker is already running for this store; --capacity applies to the next")
    shape = f"{job.dataset} × {plural(len(job.profiles), 'profile')} × {plural(job.attempts, 'attempt')}"
    if submitted.existing:
        note(f"request ID {request.request_id} was already submitted as {job.id} ({shape}); nothing new")
    else:
        note(f"submitted {job.id}: {plural(sum(job.counts.values()), 'trial')} ({shape})")
    if wait:
        from envloop.cli.progress import follow  # noqa: PLC0415 - the progress bar, only when followed

        follow(ops, job.id)
        job = ops.get_job(job.id)
    if json_:
        emit_json(job)
    elif wait:
        from envloop.cli.result import print_result  # noqa: PLC0415 - only for a followed job

        print_result(ops.job_result(job.id), ops.job_diagnosis(job.id), ops.job_usage(job.id))
    else:
        out.print(job.id)
    if wait:
        _exit_unless_completed(job)


def _job_request(config: Path | None, overrides: dict[str, object]) -> "JobRequest":
    """The job to submit: the --config file's settings, overridden by the options given. Checked
    against the wire model alone, so a submission to a server loads no store."""
    from envloop.wire.jobs import parse_job_config, parse_job_config_dict  # noqa: PLC0415 - not for --help

    base: dict[str, object] = {}
    if config is not None:
        try:
            raw = config.read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{config}: {exc.strerror}") from None
        base = parse_job_config(raw, str(config)).model_dump(exclude_unset=True)
    base.update({k: v for k, v in overrides.items() if v is not None})
    if "dataset" not in base:
        raise UserError("missing --dataset (or --config)")
    if "profiles" not in base:
        raise UserError("missing --profile (or --config)")
    return parse_job_config_dict(base)


def _exit_unless_completed(job: "JobView") -> None:
    """A followed job that ended failed or cancelled exits non-zero, so a script or CI can tell."""
    if job.status != JobStatus.COMPLETED:
        counts = ", ".join(
            f"{job.counts[s]} {s}" for s in (TrialStatus.FAILED, TrialStatus.CANCELLED) if job.counts.get(s)
        )
        warn(f"job {job.id} ended {job.status}" + (f" ({counts})" if counts else ""))
        raise typer.Exit(exits.JOB_NOT_COMPLETED)


@app.command()
def get(job_id: str, json_: JsonOpt = False) -> None:
    """A job's configuration and trial counts."""
    job = operations().get_job(job_id)
    if json_:
        emit_json(job)
        return
    out.print(f"{job.id}  {job.status}  dataset {job.dataset}  runner {job.runner}  attempts {job.attempts}")
    if job.name:
        out.print(f"name {job.name}")
    if job.note:
        out.print(f"note {job.note}")
    out.print(f"profiles {', '.join(job.profiles)}   tasks {len(job.tasks)}   created {when(job.created_at)}")
    out.print("trials " + "  ".join(f"{k} {v}" for k, v in job.counts.items()))
    tags = "  ".join(f"{k}={v}" for k, v in sorted(job.tags.items())) or "—"
    out.print(f"tags {tags}   request ID {job.request_id or '—'}")
    for item in job.skipped:
        out.print(f"not run: {item.task} ({item.reason})")


@app.command("list")
def list_(
    status: Annotated[JobStatus | None, typer.Option("--status", help="Only jobs with this status.")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="key=value (repeatable).")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="Jobs per page.")] = 50,
    before: Annotated[
        str | None,
        typer.Option("--before", help="Only jobs created before this one (the next page after it)."),
    ] = None,
    json_: JsonOpt = False,
) -> None:
    """Jobs, newest first, a page at a time (--before the last job listed for the next page)."""
    views = operations().list_jobs(status=status, tags=_tags(tag or []), limit=limit, before=before)
    if json_:
        emit_json(views)
        return
    out.print(
        table(
            ["job", "status", "dataset", "profiles", "k", "done", "created"],
            [
                [
                    # The name under the ID: the ID column is as wide as an ID anyway.
                    f"{v.id}\n{v.name}" if v.name else v.id,
                    v.status,
                    v.dataset,
                    ", ".join(v.profiles),
                    v.attempts,
                    f"{_finished(v.counts)}/{sum(v.counts.values())}",
                    when(v.created_at),
                ]
                for v in views
            ],
        )
    )


@app.command()
def cancel(
    job_id: str,
    wait_sec: Annotated[
        float, typer.Option("--wait-sec", help="How long to wait for running trials to stop.")
    ] = 60,
    json_: JsonOpt = False,
) -> None:
    """Stop pending and running trials; their environments are torn down."""
    ops = operations()
    job = ops.cancel_job(job_id)
    deadline = time.monotonic() + wait_sec
    while job.counts[TrialStatus.RUNNING] and time.monotonic() < deadline:
        time.sleep(0.1)
        job = ops.get_job(job_id)
    if job.counts[TrialStatus.RUNNING]:
        warn(f"{plural(job.counts[TrialStatus.RUNNING], 'trial')} still stopping")
    if json_:
        emit_json(job)
    else:
        out.print(f"{job.id} {job.status}")


@app.command()
def export(
    job_id: str,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file.")] = None,
    json_: JsonOpt = False,
) -> None:
    """The job's configuration, reproducible with `el job submit --config FILE` (never secret values).

    The export is JSON either way; --json is accepted like on every command."""
    config = operations().export_job(job_id)
    text = config.model_dump_json(indent=2, exclude_none=True) + "\n"
    if output is None:
        out.file.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        note(f"wrote {output}")


@app.command()
def watch(job_id: str, json_: JsonOpt = False) -> None:
    """Follow a job with a live progress bar until it ends (exit code 3 if it ends failed or cancelled)."""
    from envloop.cli.progress import follow  # noqa: PLC0415 - `el job get` needs neither
    from envloop.cli.render import result_view  # noqa: PLC0415

    ops = operations()
    follow(ops, job_id)
    job = ops.get_job(job_id)
    if json_:
        emit_json(job)
    else:
        out.print(result_view(ops.job_result(job.id)))
    _exit_unless_completed(job)


@app.command()
def share(
    job_id: str,
    expires_in: Annotated[
        float | None, typer.Option("--expires-in", help="Seconds until the token stops working.")
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            help="The console's address as readers reach it (e.g. behind a proxy); default ENVLOOP_URL, "
            "else the address `el serve` on this home listens on, else " + f"{DEFAULT_URL}.",
        ),
    ] = None,
    json_: JsonOpt = False,
) -> None:
    """A read-only token for one job: it reads that job and its trials through the API, nothing else.

    The token is shown once; `el job shares JOB` lists the job's links, `el job unshare ID` revokes one."""
    created = operations().create_share(job_id, expires_in)
    if json_:
        emit_json(created)
        return
    expiry = when(created.expires_at) if created.expires_at else "never"
    out.print(f"{created.id}  read-only access to job {created.job_id}, expires {expiry}")
    out.print(f"token  {created.token}")
    # The console page a reader opens in a browser, with no key at all.
    server = settings().url
    local = None if url or server else served_address(envloop_home())
    base = (url or server or local or DEFAULT_URL).rstrip("/")
    out.print(f"page   {base}{created.path}")
    if not url and not server:
        note(f"the page is served by `el serve` on this machine ({base}); --url names another address")
    note(
        "give the page's address to a reader, or the token as ENVLOOP_API_KEY (with ENVLOOP_URL "
        "pointing at this server) or an Authorization: Bearer header; the token is not shown again"
    )


@app.command()
def shares(job_id: str, json_: JsonOpt = False) -> None:
    """The job's share links (tokens are never shown again)."""
    links = operations().list_shares(job_id)
    if json_:
        emit_json(links)
        return
    rows = [
        (v.id, when(v.created_at), when(v.expires_at) if v.expires_at else "never", _share_state(v))
        for v in links
    ]
    out.print(table(["share", "created", "expires", "state"], rows, title=f"share links of {job_id}"))


@app.command()
def unshare(share_id: str, json_: JsonOpt = False) -> None:
    """Revoke a share link: its token stops working at once."""
    view = operations().revoke_share(share_id)
    if json_:
        emit_json(view)
    else:
        out.print(f"{view.id} revoked {when(view.revoked_at)}")


def _share_state(view: "ShareView") -> str:
    if view.revoked_at is not None:
        return f"revoked {when(view.revoked_at)}"
    return "active" if view.active else "expired"
