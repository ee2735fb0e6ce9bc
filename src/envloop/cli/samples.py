"""`el job samples`: a job's attempts with what each was asked, expected and answered."""

from typing import Annotated

import typer
from pydantic import ValidationError

from envloop.cli.backend import operations
from envloop.cli.options import JsonOpt
from envloop.cli.output import emit_json, note, out, table
from envloop.core.display import format_duration, format_score
from envloop.core.words import plural
from envloop.errors import UserError
from envloop.wire import SampleQuery
from envloop.wire.samples import MAX_SAMPLE_PAGE, SAMPLE_SORTS, SAMPLE_STATUSES

SHOWN_CHARS = 80


def _short(text: str | None) -> str | None:
    if text is None:
        return None
    line = " ".join(text.split())
    return line if len(line) <= SHOWN_CHARS else line[: SHOWN_CHARS - 1] + "…"


def _query(values: dict[str, object]) -> SampleQuery:
    """The options as a query, or one line naming the option at fault."""
    try:
        return SampleQuery.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        option = "--" + str(first["loc"][0]).replace("_", "-") if first["loc"] else "an option"
        raise UserError(f"{option}: {first['msg']}") from None


def _sample_status(value: str) -> str:
    """A usage error (exit 2) for a status no sample has, as for any option with fixed choices."""
    if value not in SAMPLE_STATUSES:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(map(repr, SAMPLE_STATUSES))}.")
    return value


def samples(
    job_id: str,
    query: Annotated[str | None, typer.Option("--query", "-q", help="Text to search for (any case).")] = None,
    status: Annotated[
        str | None,
        typer.Option("--status", parser=_sample_status, help=f"One of {', '.join(SAMPLE_STATUSES)}."),
    ] = None,
    profile: Annotated[
        str | None, typer.Option("--profile", help="Only this profile (NAME@VERSION).")
    ] = None,
    reward: Annotated[
        str, typer.Option("--reward", help="any, counted (its reward counts) or none (no counted reward).")
    ] = "any",
    min_reward: Annotated[
        float | None, typer.Option("--min-reward", help="Counted rewards of at least this.")
    ] = None,
    max_reward: Annotated[
        float | None, typer.Option("--max-reward", help="Counted rewards of at most this.")
    ] = None,
    sort: Annotated[
        str, typer.Option("--sort", help=f"One of {', '.join(SAMPLE_SORTS)} (- for descending).")
    ] = "attempt",
    limit: Annotated[int, typer.Option("--limit", min=1, max=MAX_SAMPLE_PAGE, help="Samples per page.")] = 50,
    offset: Annotated[int, typer.Option("--offset", min=0, help="Skip this many samples.")] = 0,
    json_: JsonOpt = False,
) -> None:
    """A job's attempts: input, target, output, reward, status, tokens and duration, filtered, searched
    and sorted by the store, a page at a time."""
    request = _query(
        {
            "q": query,
            "status": status,
            "profile": profile,
            "reward": reward,
            "min_reward": min_reward,
            "max_reward": max_reward,
            "sort": sort,
            "limit": limit,
            "offset": offset,
        }
    )
    page = operations().job_samples(job_id, request)
    if json_:
        emit_json(page)
        return
    rows = [
        [
            s.trial_id,
            s.task,
            s.profile,
            s.attempt,
            s.status + (" (invalidated)" if s.invalidated else ""),
            format_score(s.reward) if s.reward is not None else "missing",
            _short(s.note),  # the error, or why the verifier gave no reward
            _short(s.input),
            _short(s.target),
            _short(s.output),
            None if s.input_tokens is None else f"{s.input_tokens}/{s.output_tokens or 0}",
            None if s.duration_sec is None else format_duration(s.duration_sec),
        ]
        for s in page.samples
    ]
    columns = [
        "trial",
        "task",
        "profile",
        "#",
        "status",
        "reward",
        "why",
        "input",
        "target",
        "output",
        "tokens in/out",
        "took",
    ]
    out.print(table(columns, rows, drop_first=["tokens in/out", "profile", "target", "took", "#"]))
    end = page.offset + len(page.samples)
    note(
        f"samples {page.offset + 1 if page.samples else 0}–{end} of {plural(page.total, 'match', 'matches')}"
    )
