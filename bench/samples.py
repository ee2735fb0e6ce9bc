"""Speed of a job's samples: the console's Samples page and the API's samples of a 1,000-trial job
(target: under 300 ms on the server for a page), searched, sorted and paged in the store.

A JSONL dataset of `--rows` questions runs `--attempts` attempts each with one profile (1,000
trials by default); every trial is claimed and finished through the store's queue with the
trajectory a chat trial keeps (prompt, model answer, score). A real `el serve` (no workers)
answers. The first read of the page also reads every finished trial's answer into the store, once:
it is shown apart. Figures: median and worst of `--repeat` GETs after it, one client on loopback.

    .venv/bin/python bench/samples.py [--rows 500] [--attempts 2] [--repeat 9] [--database URL]
"""

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from el_server import el_serve

from envloop.core.trajectory import ModelRequestSummary, ModelStep, ScoreStep, TrajectoryRecorder, UserStep
from envloop.core.trial import TrialOutcome
from envloop.services import datasets, job_submission, keys, profiles
from envloop.services.context import Context, open_context
from envloop.services.profiles import ProfileDocument, ProfileSpec
from envloop.store import queue
from envloop.trajectories.files import write_trajectory

TARGET_SEC = 0.3


def _load(ctx: Context, root: Path, rows: int, attempts: int) -> str:
    source = root / "questions.jsonl"
    source.parent.mkdir(parents=True, exist_ok=True)
    with source.open("w") as out:
        for i in range(rows):
            row = {
                "id": f"q{i:05d}",
                "prompt": f"Question {i}: what is {i} + {i}? " + "Explain your reasoning step by step. " * 20,
                "answer": str(2 * i),
                "metadata": {"topic": ["arithmetic", "geometry", "logic"][i % 3]},
            }
            out.write(json.dumps(row) + "\n")
    ref = datasets.push_dataset(ctx, source, "bench-qa", scorer="exact").ref
    params = {"MODEL_PROTOCOL": "openai", "MODEL_BASE_URL": "http://127.0.0.1:9/v1", "MODEL_NAME": "bench"}
    document = ProfileDocument(schema_version="envplatform.profile/v2", spec=ProfileSpec(params=params))
    profiles.create_profile(ctx, "bench/model", "1", document)
    job = job_submission.submit_job(
        ctx, job_submission.JobRequest(dataset=ref, profiles=["bench/model@1"], attempts=attempts)
    ).job
    summary = ModelRequestSummary(protocol="openai", endpoint="http://m/v1", model="bench", messages=1)
    for trial in queue.claim(ctx.store, "bench", rows * attempts, 3600):
        number = int(trial.task_name[1:])
        right = (number + trial.attempt) % 3 != 0
        answer = f"The answer is {2 * number if right else 2 * number + 1}. " + "Because adding. " * 30
        recorder = TrajectoryRecorder(trial.trial_id, "envloop/chat@1", "chat")
        recorder.add(UserStep(text="question"))
        recorder.add(ModelStep(request=summary, text=answer))
        reward = 1.0 if right else 0.0
        recorder.add(ScoreStep(scorer="exact", expected="x", answer=answer, reward=reward, explanation="e"))
        directory = ctx.artifacts.trial_dir(trial.trial_id)
        directory.mkdir(parents=True, exist_ok=True)
        write_trajectory(directory, recorder.finish("done"), [])
        usage = {"calls": 1, "input_tokens": 200 + number % 50, "output_tokens": 40 + trial.attempt}
        assert queue.finish(ctx.store, trial, TrialOutcome(status="completed", reward=reward, usage=usage))
    return job.id


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--attempts", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--database", help="a PostgreSQL URL to use instead of SQLite")
    args = parser.parse_args()
    trials = args.rows * args.attempts
    store = "PostgreSQL" if args.database else "SQLite"
    shape = f"{args.rows} rows x {args.attempts} attempts"
    print(f"samples of a {trials}-trial job ({shape}), {store}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="envloop-bench-") as tmp:
        home = Path(tmp) / "home"
        env = dict(os.environ, ENVLOOP_HOME=str(home))
        env.pop("ENVLOOP_DATABASE_URL", None)
        os.environ.pop("ENVLOOP_DATABASE_URL", None)
        if args.database:
            env["ENVLOOP_DATABASE_URL"] = os.environ["ENVLOOP_DATABASE_URL"] = args.database
        ctx = open_context(home)
        start = time.perf_counter()
        job_id = _load(ctx, Path(tmp) / "src", args.rows, args.attempts)
        key = keys.create_key(ctx, "bench").key
        ctx.close()
        print(f"  loaded in {time.perf_counter() - start:.1f} s")
        pages = {
            "console Samples page (first 50)": f"/jobs/{job_id}/samples",
            "console, searched (?q=)": f"/jobs/{job_id}/samples?q=question+42",
            "console, counted rewards of 1, by tokens": f"/jobs/{job_id}/samples?min_reward=1&sort=-tokens",
            "console, last page": f"/jobs/{job_id}/samples?offset={trials - 50}",
            "API, 500 samples sorted by reward": f"/v1/jobs/{job_id}/samples?limit=500&sort=reward",
        }
        worst_page = 0.0
        with (
            el_serve(env) as (url, _),
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=600) as http,
        ):
            first_path = next(iter(pages.values()))
            start = time.perf_counter()
            http.get(first_path).raise_for_status()
            first = time.perf_counter() - start
            print(f"  first read (reads {trials} answers into the store once) {_ms(first)}")
            print("server time (one client over loopback):")
            for name, path in pages.items():
                times = []
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    response = http.get(path)
                    response.raise_for_status()
                    times.append(time.perf_counter() - start)
                median, worst = statistics.median(times), max(times)
                size = len(response.content) / 1024
                print(f"  {name:<44} median {_ms(median)}   worst {_ms(worst)}   {size:6.0f} KB")
                if path.startswith("/jobs/"):
                    worst_page = max(worst_page, median)
        verdict = "met" if worst_page < TARGET_SEC else "MISSED"
        print(
            f"target: a console page under {TARGET_SEC * 1000:.0f} ms (median): {verdict} ({_ms(worst_page)})"
        )


if __name__ == "__main__":
    main()
