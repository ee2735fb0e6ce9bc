"""How long a page of `el job list` takes as a project's history grows: N jobs of 5 trials each
(one submitted, the others copied from it in bulk), then the first page, a page filtered by tag, and
a page deep in the history (`before` a job near the end), each timed in-process and as `el job list`.

    .venv/bin/python bench/job_list.py [--jobs 10000] [--dir DIR]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select

from envloop.core.ids import new_id
from envloop.services import datasets, job_submission, jobs, profiles
from envloop.services.context import Context, open_context
from envloop.store.tables import Job, JobProfile, Trial

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _history(ctx: Context, root: Path, count: int) -> list[str]:
    datasets.push_dataset(ctx, EXAMPLES / "tasks", "demo")
    profile = root / "nop.json"
    profile.write_text(
        '{"schema_version": "envplatform.profile/v2", "spec": {"params": {"AGENT_NAME": "nop"}}}'
    )
    profiles.create_profile(ctx, "nop", "1", profiles.read_profile_file(profile))
    first = job_submission.submit_job(
        ctx, job_submission.JobRequest(dataset="demo@1", profiles=["nop@1"], tags={"team": "a"})
    )
    with ctx.store.write() as session:
        job = dict(session.execute(select(Job.__table__).where(Job.id == first.job.id)).mappings().one())
        link = dict(
            session.execute(select(JobProfile.__table__).where(JobProfile.job_id == job["id"]))
            .mappings()
            .one()
        )
        trials = [
            dict(row)
            for row in session.execute(select(Trial.__table__).where(Trial.job_id == job["id"])).mappings()
        ]
    ids = [job["id"]]
    for start in range(1, count, 2000):  # bounded batches keep memory flat
        rows: list[dict[str, Any]] = []
        for number in range(start, min(count, start + 2000)):
            rows.append(
                {
                    **job,
                    "id": new_id("job"),
                    "request_id": None,
                    "tags": {"team": "ab"[number % 2]},
                    "created_at": job["created_at"] + timedelta(seconds=number),
                }
            )
        with ctx.store.write() as session:
            session.execute(insert(Job), rows)
            session.execute(insert(JobProfile), [{**link, "job_id": r["id"]} for r in rows])
            session.execute(
                insert(Trial), [{**t, "id": new_id("trl"), "job_id": r["id"]} for r in rows for t in trials]
            )
        ids += [r["id"] for r in rows]
    return ids[::-1]


def _timed(call: Any, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="envloop-list-"))
    home = root / "home"
    os.environ["ENVLOOP_HOME"] = str(home)
    try:
        ctx = open_context(home)
        start = time.perf_counter()
        ids = _history(ctx, root, args.jobs)
        print(f"{args.jobs} jobs ({5 * args.jobs} trials) created in {time.perf_counter() - start:.1f} s")
        deep = ids[-60]
        cases = {
            "first page (50)": lambda: jobs.list_jobs(ctx),
            "tag team=b (50)": lambda: jobs.list_jobs(ctx, tags={"team": "b"}),
            "page before a job near the end": lambda: jobs.list_jobs(ctx, before=deep),
        }
        for name, call in cases.items():
            print(f"in-process {name}: {1000 * _timed(call):.1f} ms (best of 5)")
        ctx.close()
        el = [sys.executable, "-m", "envloop", "job", "list", "--json"]
        command = _timed(lambda: subprocess.run(el, check=True, capture_output=True), repeat=3)
        print(f"`el job list` (start-up included): {command:.2f} s (best of 3)")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores)")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
