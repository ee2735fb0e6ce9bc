"""Reading results across runs: the project leaderboard, paired comparisons, planning a comparison."""

from typing import Annotated

from fastapi import APIRouter, Query

from envloop.api.auth import JobReader, ProjectContext
from envloop.api.schemas import ERRORS, LeaderboardAdd
from envloop.services import compare, leaderboard, planning
from envloop.services.compare import Comparison
from envloop.services.leaderboard import BoardRow
from envloop.services.planning import Plan

router = APIRouter(prefix="/v1", responses=ERRORS)


@router.get("/leaderboard", tags=["leaderboard"])
def show_leaderboard(
    ctx: ProjectContext,
    dataset: Annotated[
        str | None, Query(description="one revision's board (NAME@N); all boards if absent")
    ] = None,
) -> list[BoardRow]:
    """Ranked rows (job, profile) of the project's boards, each with its coverage."""
    return leaderboard.show_leaderboard(ctx, dataset)


@router.post("/leaderboard", tags=["leaderboard"])
def add_to_leaderboard(body: LeaderboardAdd, ctx: ProjectContext) -> list[BoardRow]:
    """Save a finished job's rows; adding it again returns the saved rows unchanged."""
    return leaderboard.add_to_leaderboard(ctx, body.job_id, body.profile)


@router.get("/compare", tags=["compare"])
def compare_runs(
    ctx: ProjectContext,
    job_a: Annotated[str, Query(description="the reference run (before)")],
    job_b: Annotated[
        str | None, Query(description="the run compared to it; absent: two profiles of A")
    ] = None,
    profile_a: str | None = None,
    profile_b: str | None = None,
) -> Comparison:
    """Paired comparison B - A on the tasks both scored: difference, s.e., 95% CI, correlation."""
    return compare.compare_runs(ctx, job_a, job_b, profile_a, profile_b)


@router.get("/jobs/{job_id}/plan", tags=["compare"])
def plan_comparison(
    job_id: str,
    ctx: JobReader,
    effect: Annotated[float, Query(gt=0, description="difference to detect, in reward units")],
    profile: str | None = None,
    power: Annotated[float, Query(gt=0, lt=1)] = 0.8,
    alpha: Annotated[float, Query(gt=0, lt=1)] = 0.05,
    correlation: Annotated[float, Query(ge=-1, le=1)] = 0.0,
) -> Plan:
    """Tasks and attempts a comparison needs to detect `effect`, from this job's variance."""
    return planning.plan_comparison(ctx, job_id, effect, profile, power, alpha, correlation)
