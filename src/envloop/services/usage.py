"""What a job's trials used and cost: model calls and tokens summed from each trial's recorded
usage, their cost under the operator's price table (`core.prices`), and the trials' durations
(median, 90th percentile, longest), per profile and for the job.

The price table is read from `ENVLOOP_PRICES`, else `prices.toml` in ENVLOOP_HOME, whenever it
changed; a table that cannot be read leaves every cost out with the reason in one line (the tokens
and times are still given). A profile is priced by its
MODEL_NAME; one whose model the table does not name gets no cost and says why, never a cost of 0.
A finished job's sums never change, so they are kept in memory.
"""

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from envloop.core.prices import PriceTable, PriceTableError, parse_price_table, token_cost
from envloop.core.status import TERMINAL
from envloop.services.context import Context
from envloop.services.job_reads import job_profiles, job_row
from envloop.settings import env_name, settings
from envloop.store.reads import query
from envloop.wire.usage import JobUsage, Latency, ProfileUsage

if TYPE_CHECKING:
    from envloop.store.reads import Statement

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = ["JobUsage", "Latency", "ProfileUsage"]

PRICES_ENV = env_name("prices")
NO_TABLE = f"no price table (set {PRICES_ENV}, or put prices.toml in ENVLOOP_HOME)"
TOKEN_KEYS = ("calls", "input_tokens", "output_tokens", "cache_read_tokens")


@dataclass
class _Sums:
    """A profile's recorded usage and trial durations."""

    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_KEYS, 0))
    trials: int = 0
    durations: list[float] = field(default_factory=list)


_CACHE_SIZE = 16
_sums: OrderedDict[tuple[str, str], dict[str, _Sums]] = OrderedDict()
_prices: dict[tuple[str, int, int], PriceTable] = {}
_lock = threading.Lock()


def prices_path(ctx: Context) -> Path:
    return (settings().prices or ctx.home / "prices.toml").expanduser()


def price_table(ctx: Context) -> PriceTable | None:
    """The operator's price table, None when there is none. Raises PriceTableError, in words that
    name the field at fault and no host path."""
    path = prices_path(ctx)
    try:
        info = path.stat()
    except OSError:
        return None
    key = (str(path), info.st_mtime_ns, info.st_size)
    with _lock:
        found = _prices.get(key)
    if found is not None:
        return found
    try:
        table = parse_price_table(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise PriceTableError(f"price table: cannot be read ({type(exc).__name__})") from None
    with _lock:
        _prices.clear()
        _prices[key] = table
    return table


def job_usage(ctx: Context, job_id: str) -> JobUsage:
    with ctx.reads() as reads:
        job = job_row(reads, ctx.project_id, job_id)
        profiles = job_profiles(reads, job.id)
        finished = job.status in TERMINAL
    sums = _job_sums(ctx, job.id, finished)
    pricing: PriceTable | str  # the table, or why there is none to price with
    try:
        pricing = price_table(ctx) or NO_TABLE
    except PriceTableError as exc:
        pricing = f"{exc} ({PRICES_ENV})"
    usages = {}
    for profile in profiles:
        found = sums.get(profile.id, _Sums())
        model = profile.params.get("MODEL_NAME")
        cost, note = _cost(pricing, model, profile.params.get("MODEL_PROTOCOL"), found.tokens)
        usages[f"{profile.name}@{profile.version}"] = ProfileUsage(
            model=model,
            trials=found.trials,
            calls=found.tokens["calls"],
            input_tokens=found.tokens["input_tokens"],
            output_tokens=found.tokens["output_tokens"],
            cache_read_tokens=found.tokens["cache_read_tokens"],
            cost=cost,
            cost_note=note,
            latency=_latency(found.durations),
        )
    costs = [u.cost for u in usages.values()]
    return JobUsage(
        job_id=job.id,
        currency=pricing.currency if isinstance(pricing, PriceTable) else None,
        calls=sum(u.calls for u in usages.values()),
        input_tokens=sum(u.input_tokens for u in usages.values()),
        output_tokens=sum(u.output_tokens for u in usages.values()),
        cost=None if any(c is None for c in costs) else sum(c for c in costs if c is not None),
        latency=_latency([d for s in sums.values() for d in s.durations]),
        profiles=usages,
    )


def _cost(
    table: PriceTable | str, model: str | None, protocol: str | None, tokens: dict[str, int]
) -> tuple[float | None, str | None]:
    """The cost, or None and why (`table` is the price table, or why there is none to use)."""
    if not any(tokens[key] for key in TOKEN_KEYS[1:]):
        return 0.0, None  # no model tokens: nothing to pay, whatever the table says
    if isinstance(table, str):
        return None, table
    if not model:
        return None, "the profile names no MODEL_NAME to price"
    price = table.models.get(model)
    if price is None:
        return None, f"the price table has no price for model {model!r}"
    return token_cost(price, tokens, protocol), None


@query
def finished_trial_usage() -> "Statement":
    from sqlalchemy import bindparam, select  # noqa: PLC0415 - only when compiled (store.reads)

    from envloop.store.tables import Trial  # noqa: PLC0415

    return select(Trial.profile_id, Trial.usage, Trial.started_at, Trial.finished_at).where(
        Trial.job_id == bindparam("job_id"), Trial.status.in_(TERMINAL)
    )


def _job_sums(ctx: Context, job_id: str, finished: bool) -> dict[str, _Sums]:
    key = (ctx.url, job_id)
    with _lock:
        cached = _sums.get(key)
    if cached is not None:
        return cached
    sums: dict[str, _Sums] = {}
    with ctx.reads() as reads:
        for profile_id, usage, started, ended in reads.rows(finished_trial_usage, job_id=job_id):
            found = sums.setdefault(profile_id, _Sums())
            found.trials += 1
            for name in TOKEN_KEYS:
                value = (usage or {}).get(name, 0)
                found.tokens[name] += value if isinstance(value, int) else 0
            if started is not None and ended is not None:
                found.durations.append(_seconds(started, ended))
    if finished:
        with _lock:
            _sums[key] = sums
            while len(_sums) > _CACHE_SIZE:
                _sums.popitem(last=False)
    return sums


def _seconds(start: datetime, end: datetime) -> float:
    return max(0.0, (end - start).total_seconds())


def _latency(durations: list[float]) -> Latency:
    if not durations:
        return Latency(trials=0, median_sec=None, p90_sec=None, max_sec=None)
    ordered = sorted(durations)
    count = len(ordered)
    middle = count // 2
    median = ordered[middle] if count % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    return Latency(
        trials=count, median_sec=median, p90_sec=ordered[math.ceil(0.9 * count) - 1], max_sec=ordered[-1]
    )
