"""Which tools a job's agents called, how often, and how often a call went wrong, per profile.

Read from the trials' kept trajectories (the tool steps). A call "went wrong" in one of four
distinct ways (`core.tool_outcomes`), kept apart because they mean different things: the tool could
not run at all (`errors`: an unknown tool, bad arguments), it ran past its own time limit or the
agent's (`timeouts`), it was cut off by a cancellation (`cut_off`), or it ran and exited non-zero
(`nonzero_exits`, which is often the agent's own business, e.g. a grep with no match).

A finished job's usage is kept in memory until its result changes, like its result: reading every
trajectory of a big job on each page view would cost far more than the page. Just after the job
ended, a reading that lacks some trajectories is kept a few seconds only, since the trials' files
may still be on their way.
"""

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable

from pydantic import BaseModel, Field
from sqlalchemy import select

from envloop.core.status import TERMINAL
from envloop.core.tool_outcomes import each_tool_outcome
from envloop.core.trajectory import TRAJECTORY_FILE, Step
from envloop.services.context import Context
from envloop.services.jobs import job_profiles, load_job
from envloop.services.trial_files import surely_published
from envloop.store.artifacts import ArtifactNotFoundError
from envloop.store.reads import SessionReads
from envloop.store.tables import Trial
from envloop.trajectories.pages import TrajectoryFormatError, open_outline


class ToolStat(BaseModel):
    tool: str
    calls: int
    trials: int = Field(description="trials that called it at least once")
    errors: int = Field(description="calls the tool could not run (unknown tool, bad arguments)")
    timeouts: int = Field(description="calls that ran past their own time limit or the agent's")
    cut_off: int = Field(default=0, description="calls still running when the trial was cancelled")
    nonzero_exits: int


class ProfileToolUsage(BaseModel):
    trials: int = Field(description="finished trials of the profile")
    with_trajectory: int = Field(description="of which kept a readable trajectory")
    tools: list[ToolStat] = Field(description="most called first")


class ToolUsage(BaseModel):
    job_id: str
    profiles: dict[str, ProfileToolUsage]


_CACHE_SIZE = 8
RECHECK_SEC = 5.0
"""How long a reading that lacks some trajectories is kept while the trials' files may still be
published: long enough that a page refreshed in a loop does not read every trajectory each time."""
_cache: OrderedDict[tuple[str, str, int], tuple[ToolUsage, float | None]] = OrderedDict()
_lock = threading.Lock()


def tool_usage(ctx: Context, job_id: str) -> ToolUsage:
    with ctx.store.read() as session:
        job = load_job(session, ctx.project_id, job_id)
        key = (ctx.store.url, job.id, job.result_version)
        finished = job.status in TERMINAL
        settled = surely_published(job.finished_at)
        profiles = job_profiles(SessionReads(session), job.id)
        if finished:
            with _lock:
                found = _cache.get(key)
                if found is not None and (found[1] is None or time.monotonic() < found[1]):
                    _cache.move_to_end(key)
                    return found[0]
        rows = session.execute(
            select(Trial.id, Trial.profile_id)
            .where(Trial.job_id == job.id, Trial.status.in_(TERMINAL))
            .order_by(Trial.profile_id, Trial.member_position, Trial.attempt)
        ).all()
    usage = ToolUsage(
        job_id=job.id,
        profiles={
            f"{p.name}@{p.version}": _profile_usage(ctx, [r.id for r in rows if r.profile_id == p.id])
            for p in profiles
        },
    )
    if finished:
        # A trial's files are published just after its result is recorded: a reading that lacks
        # some trajectories is read again a little later, until they are surely all there.
        complete = all(p.with_trajectory == p.trials for p in usage.profiles.values())
        recheck = None if complete or settled else time.monotonic() + RECHECK_SEC
        with _lock:
            _cache[key] = (usage, recheck)
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    return usage


def _profile_usage(ctx: Context, trial_ids: list[str]) -> ProfileToolUsage:
    stats: dict[str, ToolStat] = {}
    readable = 0
    for trial_id in trial_ids:
        try:
            outline = open_outline(ctx.artifacts.trial_file(trial_id, TRAJECTORY_FILE))
            counted = _trial_counts(outline.iter_steps(), outline.head.stop_reason == "timeout")
        except (ArtifactNotFoundError, TrajectoryFormatError, OSError):
            continue
        readable += 1
        for tool, counts in counted.items():
            stat = stats.setdefault(
                tool, ToolStat(tool=tool, calls=0, trials=0, errors=0, timeouts=0, nonzero_exits=0)
            )
            stat.trials += 1
            stat.calls += counts.calls
            stat.errors += counts.errors
            stat.timeouts += counts.timeouts
            stat.cut_off += counts.cut_off
            stat.nonzero_exits += counts.nonzero_exits
    tools = sorted(stats.values(), key=lambda s: (-s.calls, s.tool))
    return ProfileToolUsage(trials=len(trial_ids), with_trajectory=readable, tools=tools)


def _trial_counts(steps: Iterable[Step], agent_timed_out: bool) -> dict[str, ToolStat]:
    """One trial's calls per tool, read a step at a time."""
    counted: dict[str, ToolStat] = {}
    for step, outcome in each_tool_outcome(steps, agent_timed_out):
        stat = counted.setdefault(
            step.tool, ToolStat(tool=step.tool, calls=0, trials=1, errors=0, timeouts=0, nonzero_exits=0)
        )
        stat.calls += 1
        if outcome == "could_not_run":
            stat.errors += 1
        elif outcome == "timed_out":
            stat.timeouts += 1
        elif outcome == "cut_off":
            stat.cut_off += 1
        elif outcome == "nonzero_exit":
            stat.nonzero_exits += 1
    return counted
