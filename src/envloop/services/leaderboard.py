"""The project leaderboard: explicitly added (job, profile) snapshots, ranked when read.

There is one board per dataset revision. The first run added fixes its compatibility key (runner,
task names and digests, attempt count, see `core.leaderboard`); a later run with another key is
refused, naming the field that differs. A row's snapshot is computed once, when it is added, and
never recomputed: adding the same (job, profile) again returns the saved row even if trials were
invalidated since. Only finished jobs can be added, since a snapshot of a running job would freeze
a result that is still changing.
"""

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from envloop.core.clock import utc_now
from envloop.core.display import coverage_line
from envloop.core.ids import new_id
from envloop.core.leaderboard import RunKey, key_differences, model_label, rank_standings
from envloop.core.metrics import ProfileMetrics, bounds_of
from envloop.core.status import TERMINAL
from envloop.errors import UserError
from envloop.services.context import Context
from envloop.services.datasets import dataset_members, resolve_dataset
from envloop.services.job_reads import ProfileRow
from envloop.services.jobs import job_profiles, load_job
from envloop.services.refs import dataset_ref
from envloop.services.results import ProfileResult, job_result
from envloop.store.reads import SessionReads
from envloop.store.tables import Dataset, Job, LeaderboardRow
from envloop.wire.leaderboard import BoardEntry, BoardRow, RunSummary

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = ["BoardEntry", "BoardRow", "RunSummary"]


def run_summary(
    key: RunKey, job_id: str, job_status: str, profile: ProfileRow, metrics: ProfileMetrics
) -> RunSummary:
    ref = f"{profile.name}@{profile.version}"
    return RunSummary(
        job_id=job_id,
        profile=ref,
        model=model_label(profile.params, ref),
        dataset=key.dataset,
        runner=key.runner,
        attempts=key.attempts,
        job_status=job_status,
        coverage=coverage_line(metrics),
        score=metrics.score,
        stderr=metrics.stderr,
        ci95=metrics.ci95,
    )


def run_key(session: Session, job: Job) -> RunKey:
    """The job's compatibility key: what a board, or a comparison, needs to be equal."""
    dataset = session.get(Dataset, job.dataset_id)
    assert dataset is not None
    digests = {m.name: m.digest for m in dataset_members(session, job.dataset_id)}
    return RunKey(
        dataset=dataset_ref(dataset.name, dataset.version),
        runner=job.runner,
        attempts=job.attempts,
        tasks=tuple((name, digests[name]) for name in job.tasks),
    )


def _entry(
    key: RunKey, job_id: str, job_status: str, profile: ProfileRow, metrics: ProfileResult, added_at: datetime
) -> BoardEntry:
    counts = metrics.score_counts
    lower, upper = bounds_of(metrics)
    return BoardEntry(
        **dict(run_summary(key, job_id, job_status, profile, metrics)),
        pass_=metrics.pass_,
        pass_at_k=metrics.pass_at_k,
        pass_hat_k=metrics.pass_hat_k,
        scored=counts.scored,
        missing=counts.missing,
        total=counts.total,
        invalid=counts.invalid,
        invalidated=counts.invalidated,
        complete_members=counts.complete_members,
        total_members=counts.total_members,
        composite=metrics.structured.composite,
        dimensions=metrics.structured.dimensions,
        added_at=added_at,
        lower_bound=lower,
        upper_bound=upper,
        flagged=metrics.flags.flagged,
        flags=metrics.flags.by_kind,
    )


def add_to_leaderboard(ctx: Context, job_id: str, profile: str | None = None) -> list[BoardRow]:
    """Add the job's profiles (or only `profile`) to its dataset revision's board; returns their rows.

    A (job, profile) already on the board keeps its saved snapshot. A job whose compatibility key
    differs from the board's is refused with every differing field named, and nothing is added.
    """
    with ctx.store.read() as session:
        job = load_job(session, ctx.project_id, job_id)
        if job.status not in TERMINAL:
            raise UserError(
                f"job {job.id} is {job.status}: add it when it has finished (a row is a snapshot)"
            )
        profiles = job_profiles(SessionReads(session), job.id)
        chosen = profiles if profile is None else [pick_profile(job.id, profiles, profile, "the board")]
        key = run_key(session, job)
        saved = set(
            session.scalars(
                select(LeaderboardRow.profile_id).where(
                    LeaderboardRow.project_id == ctx.project_id, LeaderboardRow.job_id == job.id
                )
            )
        )
    new = [p for p in chosen if p.id not in saved]
    result = job_result(ctx, job.id) if new else None
    if result is not None:
        _insert(ctx, job, key, new, result.status, result.profiles)
    refs = {f"{p.name}@{p.version}" for p in chosen}
    return [row for row in show_leaderboard(ctx, key.dataset) if row.job_id == job.id and row.profile in refs]


def pick_profile(job_id: str, profiles: list[ProfileRow], ref: str | None, role: str) -> ProfileRow:
    """The job's profile named `ref`; without a name, its only profile. `role` names what it is for."""
    refs = ", ".join(f"{p.name}@{p.version}" for p in profiles)
    if ref is None:
        if len(profiles) > 1:
            raise UserError(f"job {job_id} ran {len(profiles)} profiles ({refs}): name the one for {role}")
        return profiles[0]
    for p in profiles:
        if f"{p.name}@{p.version}" == ref:
            return p
    raise UserError(f"job {job_id} did not run profile {ref} (it ran {refs})")


def _insert(
    ctx: Context,
    job: Job,
    key: RunKey,
    profiles: list[ProfileRow],
    status: str,
    metrics: dict[str, ProfileResult],
) -> None:
    digest = key.digest()
    with ctx.store.write() as session:
        # One writer per board at a time (SQLite serializes writers anyway), so two incompatible
        # runs can never both become the first row of an empty board.
        session.execute(select(Dataset.id).where(Dataset.id == job.dataset_id).with_for_update())
        first = session.scalars(
            select(LeaderboardRow)
            .where(LeaderboardRow.project_id == ctx.project_id, LeaderboardRow.dataset_id == job.dataset_id)
            .limit(1)
        ).first()
        if first is not None and first.board_key != digest:
            board_job = session.get(Job, first.job_id)
            assert board_job is not None
            differences = key_differences(run_key(session, board_job), key) or ["compatibility key differs"]
            raise UserError(
                f"job {job.id} does not fit the {key.dataset} leaderboard: {'; '.join(differences)}"
            )
        present = set(
            session.scalars(
                select(LeaderboardRow.profile_id).where(
                    LeaderboardRow.project_id == ctx.project_id, LeaderboardRow.job_id == job.id
                )
            )
        )
        for profile in profiles:
            if profile.id in present:
                continue  # added meanwhile by someone else: their snapshot is the saved one
            added_at = utc_now()
            ref = f"{profile.name}@{profile.version}"
            entry = _entry(key, job.id, status, profile, metrics[ref], added_at)
            session.add(
                LeaderboardRow(
                    id=new_id("lbr"),
                    project_id=ctx.project_id,
                    board_key=digest,
                    dataset_id=job.dataset_id,
                    job_id=job.id,
                    profile_id=profile.id,
                    snapshot=entry.model_dump(mode="json"),
                    created_at=added_at,
                )
            )


def show_leaderboard(ctx: Context, dataset: str | None = None) -> list[BoardRow]:
    """Ranked rows of one dataset revision's board, or of every board (ranked within each)."""
    with ctx.store.read() as session:
        query = select(LeaderboardRow.dataset_id, LeaderboardRow.snapshot).where(
            LeaderboardRow.project_id == ctx.project_id
        )
        if dataset is not None:
            query = query.where(
                LeaderboardRow.dataset_id == resolve_dataset(session, ctx.project_id, dataset).id
            )
        rows = session.execute(query.order_by(LeaderboardRow.dataset_id)).all()
    boards: dict[str, list[BoardEntry]] = {}
    for dataset_id, snapshot in rows:
        boards.setdefault(dataset_id, []).append(BoardEntry.model_validate(snapshot))
    ranked: list[BoardRow] = []
    for entries in sorted(boards.values(), key=lambda board: board[0].dataset):
        for placement in rank_standings(entries):
            entry = entries[placement.row]
            ranked.append(
                BoardRow.model_construct(
                    **dict(entry),
                    rank=placement.rank,
                    tied=placement.tied,
                    not_separated_from=list(placement.not_separated_from),
                )
            )
    return ranked
