"""Which tools a job's agents called, how often, and how often a call went wrong, per profile.

Read from the trials' kept trajectories (the tool steps). A call "went wrong" in one of three
distinct ways, kept apart because they mean different things: the tool could not run at all
(`errors`: an unknown tool, bad arguments), it ran past its time limit (`timeouts`), or it ran and
exited non-zero (`nonzero_exits`, which is often the agent's own business, e.g. a grep with no match).

A finished job's usage is kept in memory until its result changes, like its result: reading every
trajectory of a big job on each page view would cost far more than the page.
"""

import threading
from collections import OrderedDict
from collections.abc import Iterable

from pydantic import BaseModel, Field
from sqlalchemy import select

from envloop.core.status import TERMINAL
from envloop.core.trajectory import TRAJECTORY_FILE, Step, ToolStep
from envloop.services.context import Context
from envloop.services.jobs import job_profiles, load_job
from envloop.store.artifacts import ArtifactNotFoundError
from envloop.store.tables import Trial
from envloop.trajectories.pages import TrajectoryFormatError, open_outline


class ToolStat(BaseModel):
    tool: str
    calls: int
    trials: int = Field(description="trials that called it at least once")
    errors: int = Field(description="calls the tool could not run (unknown tool, bad arguments)")
    timeouts: int
    nonzero_exits: int


class ProfileToolUsage(BaseModel):
    trials: int = Field(description="finished trials of the profile")
    with_trajectory: int = Field(description="of which kept a readable trajectory")
    tools: list[ToolStat] = Field(description="most called first")


class ToolUsage(BaseModel):
    job_id: str
    profiles: dict[str, ProfileToolUsage]


_CACHE_SIZE = 8
_cache: OrderedDict[tuple[str, str, int], ToolUsage] = OrderedDict()
_lock = threading.Lock()


def tool_usage(ctx: Context, job_id: str) -> ToolUsage:
    with ctx.store.read() as session:
        job = load_job(session, ctx.project_id, job_id)
        key = (ctx.store.url, job.id, job.result_version)
        finished = job.status in TERMINAL
        profiles = job_profiles(session, job.id)
        if finished:
            with _lock:
                if (found := _cache.get(key)) is not None:
                    _cache.move_to_end(key)
                    return found
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
        with _lock:
            _cache[key] = usage
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    return usage


def _profile_usage(ctx: Context, trial_ids: list[str]) -> ProfileToolUsage:
    stats: dict[str, ToolStat] = {}
    readable = 0
    for trial_id in trial_ids:
        try:
            outline = open_outline(ctx.artifacts.trial_file(trial_id, TRAJECTORY_FILE))
            counted = _trial_counts(outline.iter_steps())
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
            stat.nonzero_exits += counts.nonzero_exits
    tools = sorted(stats.values(), key=lambda s: (-s.calls, s.tool))
    return ProfileToolUsage(trials=len(trial_ids), with_trajectory=readable, tools=tools)


def _trial_counts(steps: Iterable[Step]) -> dict[str, ToolStat]:
    """One trial's calls per tool, read a step at a time."""
    counted: dict[str, ToolStat] = {}
    for step in steps:
        if not isinstance(step, ToolStep):
            continue
        stat = counted.setdefault(
            step.tool, ToolStat(tool=step.tool, calls=0, trials=1, errors=0, timeouts=0, nonzero_exits=0)
        )
        stat.calls += 1
        if step.error is not None:
            stat.errors += 1
        elif step.timed_out:
            stat.timeouts += 1
        elif step.exit_code not in (None, 0):
            stat.nonzero_exits += 1
    return counted
