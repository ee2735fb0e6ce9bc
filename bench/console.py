"""Speed of the web console on big inputs: the job page and task grid of a 10,000-trial job, and the
trace viewer of a 1,000-step trajectory with large outputs.

A job of 1,000 tasks x 2 profiles x 5 attempts is submitted and every trial is marked finished
(rewards 0/1, some missing, some failed) straight in the store; one of its trials gets a synthetic
1,000-step trajectory (model calls, tool calls with outputs up to 200 KB, file changes with diffs).
A real `el serve` (no workers) answers. Figures, for each page:

- server time: median and worst of `--repeat` GETs of the HTML (the first, cold one shown apart);
- time until usable in Debian's chromium: from navigation until the page's key content is shown
  (the coverage line; the grid's attempt cells; the trace's timeline and selected step), and for the
  trace viewer, how long jumping to the last step takes (End key) and loading a 200 KB output.

    .venv/bin/python bench/console.py [--tasks 1000] [--attempts 5] [--steps 1000] [--repeat 5]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from el_server import el_serve
from sqlalchemy import select, update

from envloop.core.trajectory import (
    FileChange,
    ModelRequestSummary,
    ModelStep,
    SystemStep,
    ToolCall,
    ToolStep,
    TrajectoryRecorder,
    Usage,
    UserStep,
    VerifierStep,
)
from envloop.services import datasets, job_submission, keys, profiles
from envloop.services.context import Context, open_context
from envloop.services.profiles import ProfileDocument, ProfileSpec
from envloop.store.queue import refresh_job_status
from envloop.store.tables import Trial
from envloop.trajectories.files import write_trajectory

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _tasks(root: Path, count: int) -> Path:
    for i in range(count):
        task = root / f"task-{i:04d}"
        (task / "tests").mkdir(parents=True)
        (task / "task.toml").write_text('version = "1.0"\n')
        (task / "instruction.md").write_text(f"Task {i}.\n")
        (task / "tests" / "test.sh").write_text("#!/usr/bin/env bash\necho 1 > /logs/verifier/reward.txt\n")
    return root


def _load(ctx: Context, root: Path, tasks: int, attempts: int) -> str:
    ref = datasets.push_dataset(ctx, _tasks(root, tasks), "bench").ref
    for name in ("bench/a", "bench/b"):
        doc = ProfileDocument(
            schema_version="envplatform.profile/v2", spec=ProfileSpec(params={"AGENT_NAME": "nop"})
        )
        profiles.create_profile(ctx, name, "1", doc)
    request = job_submission.JobRequest(dataset=ref, profiles=["bench/a@1", "bench/b@1"], attempts=attempts)
    job_id = job_submission.submit_job(ctx, request).job.id
    with ctx.store.write_connection() as conn:
        reward = ((Trial.attempt + Trial.member_position) % 2).cast(Trial.reward.type)
        conn.execute(update(Trial).where(Trial.job_id == job_id).values(status="completed", reward=reward))
        conn.execute(
            update(Trial)
            .where(Trial.job_id == job_id, Trial.member_position % 7 == 0, Trial.attempt == 1)
            .values(reward=None, reward_note="the verifier wrote neither reward.txt nor reward.json")
        )
        conn.execute(
            update(Trial)
            .where(Trial.job_id == job_id, Trial.member_position % 11 == 0, Trial.attempt == 2)
            .values(status="failed", error_type="agent_timeout", error_message="agent ran past 600 s")
        )
        refresh_job_status(conn, job_id)
    return job_id


def _trajectory(ctx: Context, trial_id: str, steps: int) -> None:
    """A `steps`-step trajectory: model call, tool call, model call, … with big outputs now and then."""
    recorder = TrajectoryRecorder(trial_id, "envloop/shell@1", "envloop", "bench-model", "openai")
    recorder.add(SystemStep(text="You are an autonomous agent in a Linux sandbox."))
    recorder.add(UserStep(text="Make the tests pass.\n"))
    request = ModelRequestSummary(
        protocol="openai", endpoint="http://model/v1", model="bench-model", messages=2
    )
    turn = 0
    while len(recorder.trajectory.steps) < steps - 1:
        turn += 1
        call = ToolCall(id=f"c{turn}", name="bash", arguments={"command": f"make step-{turn}"})
        recorder.add(
            ModelStep(
                request=request,
                text=f"Step {turn}: running make.",
                tool_calls=[call],
                usage=Usage(input_tokens=900),
            )
        )
        lines = 6000 if turn % 50 == 0 else 40
        output = "".join(f"line {n} of the build output for step {turn}\n" for n in range(lines))
        changes = []
        if turn % 5 == 0:
            diff = (
                f"--- a/src/f{turn}.py\n+++ b/src/f{turn}.py\n@@ -1 +1 @@\n-old = {turn - 1}\n+old = {turn}\n"
            )
            changes.append(FileChange(path=f"src/f{turn}.py", change="modified", size=12, diff=diff))
        recorder.add(
            ToolStep(
                call_id=call.id,
                tool="bash",
                command=call.arguments["command"],
                exit_code=1 if turn % 9 == 0 else 0,
                stdout=output,
                changes=changes,
            )
        )
    recorder.add(VerifierStep(command="bash /tests/test.sh", exit_code=0, reward=1.0))
    directory = ctx.artifacts.trial_dir(trial_id)
    directory.mkdir(parents=True, exist_ok=True)
    path = write_trajectory(directory, recorder.finish("done"), [])
    print(f"  trajectory: {len(recorder.trajectory.steps)} steps, {path.stat().st_size / 1e6:.1f} MB")


def _server_times(http: httpx.Client, path: str, repeat: int) -> tuple[float, list[float], int]:
    def once() -> tuple[float, int]:
        start = time.perf_counter()
        response = http.get(path)
        response.raise_for_status()
        return time.perf_counter() - start, len(response.content)

    cold, size = once()
    return cold, [once()[0] for _ in range(repeat)], size


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:7.0f} ms"


def _report(name: str, cold: float, warm: list[float], size: int | None = None) -> None:
    extra = f"   {size / 1024:6.0f} KB" if size is not None else ""
    median, worst = _ms(statistics.median(warm)), _ms(max(warm))
    print(f"  {name:<44} first {_ms(cold)}   median {median}   worst {worst}{extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        sys.exit(f"{CHROMIUM} is missing: scripts/setup installs Debian's chromium")
    from playwright.sync_api import sync_playwright  # noqa: PLC0415

    trials = args.tasks * 2 * args.attempts
    shape = f"{args.tasks} tasks x 2 profiles x {args.attempts}"
    print(f"{trials} trials ({shape}), {args.steps} steps, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="envloop-bench-") as tmp:
        home = Path(tmp) / "home"
        os.environ.pop("ENVLOOP_DATABASE_URL", None)
        ctx = open_context(home)
        start = time.perf_counter()
        job_id = _load(ctx, Path(tmp) / "src", args.tasks, args.attempts)
        with ctx.store.read() as session:
            trial_id = session.scalar(select(Trial.id).where(Trial.job_id == job_id).limit(1))
        assert trial_id is not None
        _trajectory(ctx, trial_id, args.steps)
        key = keys.create_key(ctx, "bench").key
        ctx.close()
        print(f"  loaded in {time.perf_counter() - start:.1f} s")
        pages = {
            "job page (Metrics)": f"/jobs/{job_id}",
            "task grid (first 100 tasks)": f"/jobs/{job_id}/grid",
            "task grid sorted by spread": f"/jobs/{job_id}/grid?sort=attempt_spread",
            "tool usage fragment": f"/jobs/{job_id}/tools",
            "trace viewer": f"/trials/{trial_id}/trace",
            "trace: next 200 steps (fragment)": f"/trials/{trial_id}/trace/steps?offset=200&limit=200",
            "trace: one step (fragment)": f"/trials/{trial_id}/trace/step/{args.steps - 2}",
        }
        with el_serve(dict(os.environ, ENVLOOP_HOME=str(home))) as (url, _):
            print("server time (HTML over loopback, one client):")
            headers = {"Authorization": f"Bearer {key}"}
            with httpx.Client(base_url=url, headers=headers, timeout=300) as http:
                for name, path in pages.items():
                    cold, warm, size = _server_times(http, path, args.repeat)
                    _report(name, cold, warm, size)
            print("time until usable in chromium (navigation to key content shown):")
            with sync_playwright() as driver:
                browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                context = browser.new_context(
                    viewport={"width": 1280, "height": 900}, extra_http_headers=headers
                )
                page = context.new_page()

                def usable(path: str, ready: Callable[[], None]) -> float:
                    start = time.perf_counter()
                    page.goto(url + path, wait_until="commit")
                    ready()
                    return time.perf_counter() - start

                cells = min(args.tasks, 100) * 2 * args.attempts
                checks: dict[str, tuple[str, Callable[[], None]]] = {
                    "job page": (
                        pages["job page (Metrics)"],
                        page.locator(".coverage-line").first.wait_for,
                    ),
                    "job page with tool usage loaded": (
                        pages["job page (Metrics)"],
                        page.locator("#tool-usage h3").first.wait_for,
                    ),
                    "task grid": (
                        pages["task grid (first 100 tasks)"],
                        lambda: page.locator("a.cell").nth(cells - 1).wait_for(),
                    ),
                    "trace viewer": (
                        pages["trace viewer"],
                        lambda: page.locator("#step-detail article[data-index='0']").wait_for(),
                    ),
                }
                for name, (path, ready) in checks.items():
                    cold = usable(path, ready)
                    warm = [usable(path, ready) for _ in range(args.repeat)]
                    _report(name, cold, warm)
                jumps, loads = [], []
                for _ in range(args.repeat):
                    page.goto(url + pages["trace viewer"])
                    page.locator("#step-detail article[data-index='0']").wait_for()
                    page.locator("#timeline").focus()
                    start = time.perf_counter()
                    last = int(page.locator("#trace").get_attribute("data-total") or 0) - 1
                    page.keyboard.press("End")
                    page.locator(f"#step-detail article[data-index='{last}']").wait_for()
                    jumps.append(time.perf_counter() - start)
                    page.goto(url + pages["trace viewer"] + f"?step={2 * 50 + 1}")  # the tool step of turn 50
                    button = page.locator("button.more-text").first
                    start = time.perf_counter()
                    button.click()
                    button.wait_for(state="detached")
                    loads.append(time.perf_counter() - start)
                _report("trace: End key to the last step (all loaded)", jumps[0], jumps)
                _report("trace: show all of a 200 KB output", loads[0], loads)
                browser.close()


if __name__ == "__main__":
    main()
