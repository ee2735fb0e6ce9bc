"""Cost of honest metrics at scale: a million-attempt job, and a 10,000-row leaderboard.

Metrics: one profile with `--tasks` tasks x `--attempts` attempts (default 10,000 x 100 = 1,000,000),
binary rewards drawn with a fixed seed from per-task difficulties, 1% of attempts without a reward.
Timed: building the attempt slots the store read produces, the full metrics (score, pass@k, pass^k,
coverage, the estimator curve for every k up to 100, clustered stderr, the t/Wilson interval), a
paired comparison with a second profile, and the planning variance components.

Leaderboard: `--rows` saved rows (default 10,000) on one board in a real SQLite store. Timed:
`show_leaderboard` (read, validate and rank every snapshot), ranking alone, and adding one more
finished job to the full board (compatibility check, metrics, snapshot, insert, re-rank).

    .venv/bin/python bench/metrics.py [--tasks 10000] [--attempts 100] [--rows 10000]
"""

import argparse
import json
import random
import resource
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import insert

from envloop.core.ids import new_id
from envloop.core.leaderboard import rank_standings
from envloop.core.metrics import AttemptSlot, compute_metrics, paired_tasks, task_means
from envloop.core.planning import difference_variance, tasks_needed, variance_components
from envloop.core.trial import TrialOutcome
from envloop.services import datasets, job_submission, leaderboard, profiles
from envloop.services.context import Context, open_context
from envloop.services.leaderboard import BoardEntry
from envloop.store import queue
from envloop.store.tables import Job, LeaderboardRow, Profile

SEED = 20260101


def _timed(label: str, start: float) -> float:
    elapsed = time.perf_counter() - start
    print(f"  {label:<58}{elapsed * 1000:>10.1f} ms")
    return elapsed


def _slots(tasks: list[str], attempts: int, rng: random.Random, shift: float) -> list[AttemptSlot]:
    slots = []
    for task in tasks:
        difficulty = min(1.0, rng.random() + shift)
        for attempt in range(1, attempts + 1):
            if rng.random() < 0.01:
                slots.append(AttemptSlot(task=task, attempt=attempt, state="invalid"))
            else:
                reward = 1.0 if rng.random() < difficulty else 0.0
                slots.append(AttemptSlot(task=task, attempt=attempt, state="scored", reward=reward))
    return slots


def bench_job_metrics(n_tasks: int, attempts: int) -> None:
    print(f"job metrics: {n_tasks} tasks x {attempts} attempts = {n_tasks * attempts} attempts")
    tasks = [f"task-{i:06d}" for i in range(n_tasks)]
    start = time.perf_counter()
    slots = _slots(tasks, attempts, random.Random(SEED), 0.0)
    _timed("build attempt slots (as read from the store)", start)
    start = time.perf_counter()
    metrics = compute_metrics(tasks, attempts, slots)
    _timed(f"full metrics: coverage, pass@k, curve to k={attempts}, s.e., CI", start)
    assert metrics.curve is not None and metrics.ci95 is not None
    counts = metrics.score_counts
    print(
        f"    score {metrics.score:.4f} (95% CI {metrics.ci95[0]:.4f}-{metrics.ci95[1]:.4f}), "
        f"{counts.scored}/{counts.total} scored, {len(metrics.curve)} curve points"
    )
    other = compute_metrics(tasks, attempts, _slots(tasks, attempts, random.Random(SEED), 0.02))
    start = time.perf_counter()
    paired = paired_tasks(task_means(metrics), task_means(other))
    _timed("paired comparison with a second profile (B - A per task)", start)
    difference = paired.difference
    print(
        f"    B - A {difference.mean_difference:+.4f} (s.e. {difference.stderr:.4f}, "
        f"correlation {difference.correlation:.3f}) on {difference.tasks} tasks"
    )
    start = time.perf_counter()
    rewards = [[a for a in row.attempts if not isinstance(a, str)] for row in metrics.members]
    components = variance_components(rewards)
    needed = tasks_needed(difference_variance(components, attempts, 0.0), 0.01, 0.05, 0.8)
    _timed("planning: variance components and tasks for a 1-point effect", start)
    print(f"    {needed} tasks needed at {attempts} attempts")


def _task(root: Path, name: str) -> Path:
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text('version = "1.0"\n')
    (task / "instruction.md").write_text("Nothing to do.\n")
    (task / "tests" / "test.sh").write_text(
        '#!/usr/bin/env bash\necho 1 > "$ENVLOOP_LOGS_DIR/verifier/reward.txt"\n'
    )
    return task


def _prepare_board(ctx: Context, root: Path, rows: int) -> tuple[str, str]:
    for name in ("alpha", "beta", "gamma"):
        _task(root / "tasks", name)
    dataset = datasets.push_dataset(ctx, root / "tasks", "board")
    profile_file = root / "profile.json"
    profile_file.write_text(
        json.dumps({"schema_version": "envplatform.profile/v2", "spec": {"params": {"AGENT_NAME": "nop"}}})
    )
    profile = profiles.create_profile(ctx, "team/model", "1", profiles.read_profile_file(profile_file))
    job = job_submission.submit_job(
        ctx, job_submission.JobRequest(dataset=dataset.ref, profiles=[profile.ref], attempts=2)
    ).job
    for trial in queue.claim(ctx.store, "bench", 100, 3600):
        queue.finish(ctx.store, trial, TrialOutcome(status="completed", reward=1.0))
    (template,) = leaderboard.add_to_leaderboard(ctx, job.id)
    rng = random.Random(SEED)
    base = datetime.now(UTC)
    job_rows, board_rows = [], []
    with ctx.store.read() as session:
        stored = session.get(Job, job.id)
        profile_row = session.query(Profile).filter(Profile.name == "team/model").one()
        assert stored is not None
        dataset_id, tasks, profile_id = stored.dataset_id, list(stored.tasks), profile_row.id
        board_key = session.query(LeaderboardRow.board_key).filter(LeaderboardRow.job_id == job.id).scalar()
    for i in range(rows - 1):
        job_id = new_id("job")
        added = base + timedelta(microseconds=i)
        job_rows.append(
            {
                "id": job_id,
                "project_id": ctx.project_id,
                "dataset_id": dataset_id,
                "runner": "envloop/shell@1",
                "attempts": 2,
                "status": "completed",
                "tasks": tasks,
                "tags": {},
                "cancel_requested": False,
                "claim_seq": 0,
                "created_at": added,
            }
        )
        score = rng.choice([None, round(rng.random(), 2)]) if i % 50 == 0 else round(rng.random(), 3)
        entry = template.model_copy(update={"job_id": job_id, "score": score, "added_at": added})
        board_rows.append(
            {
                "id": new_id("lbr"),
                "project_id": ctx.project_id,
                "board_key": board_key,
                "dataset_id": dataset_id,
                "job_id": job_id,
                "profile_id": profile_id,
                "snapshot": BoardEntry.model_validate(entry.model_dump()).model_dump(mode="json"),
                "created_at": added,
            }
        )
    with ctx.store.write() as session:
        session.execute(insert(Job), job_rows)
        session.execute(insert(LeaderboardRow), board_rows)
    return dataset.ref, profile.ref


def bench_leaderboard(root: Path, rows: int) -> None:
    print(f"leaderboard: {rows} rows on one board (SQLite)")
    ctx = open_context(root / "home")
    try:
        start = time.perf_counter()
        dataset, profile = _prepare_board(ctx, root, rows)
        _timed("setup: store, one real row, bulk insert of the rest", start)
        start = time.perf_counter()
        shown = leaderboard.show_leaderboard(ctx, dataset)
        _timed("show: read, validate and rank every row", start)
        assert len(shown) == rows
        start = time.perf_counter()
        rank_standings(shown)
        _timed("rank alone (ties, unscored rows last)", start)
        job = job_submission.submit_job(
            ctx, job_submission.JobRequest(dataset=dataset, profiles=[profile], attempts=2)
        ).job
        for trial in queue.claim(ctx.store, "bench", 100, 3600):
            queue.finish(ctx.store, trial, TrialOutcome(status="completed", reward=0.0))
        start = time.perf_counter()
        (row,) = leaderboard.add_to_leaderboard(ctx, job.id)
        _timed("add one finished job to the full board", start)
        print(f"    the new row ranks {row.rank} of {rows + 1} (tied: {row.tied})")
    finally:
        ctx.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--attempts", type=int, default=100)
    parser.add_argument("--rows", type=int, default=10_000)
    args = parser.parse_args()
    bench_job_metrics(args.tasks, args.attempts)
    root = Path(tempfile.mkdtemp(prefix="envloop-bench-metrics-"))
    try:
        bench_leaderboard(root, args.rows)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory {peak:.0f} MiB")


if __name__ == "__main__":
    main()
