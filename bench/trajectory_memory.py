"""Server memory while serving large trajectories: a real `el serve` reads them a page at a time, so
its resident memory must grow by tens of MB at most, whatever the trajectory's size.

Two trajectories are laid down for trials of one finished job:

- `huge`: the older indented layout with one step of `--huge-mb` MB (what a 0.4 MB upload holding a
  400 MB instruction made before instructions were capped: a 377 MB trajectory per attempt);
- `capped`: the layout written now, at its cap (steps with 32 KB outputs up to 64 MB).

The same file is linked into `--trials` trials (the console once kept 16 parsed trajectories). For
each operation the server's resident set (RSS, sampled every 10 ms) is reported as its peak growth
over the value before the operation:

- the API's step pages, read from first to last; the whole trajectory (`/steps`) and its ATIF export
  (`/steps?format=atif`) streamed and discarded; three of those at once;
- the console's trace viewer: its page, the last step, and the first step's text, for every trial.

    .venv/bin/python bench/trajectory_memory.py [--huge-mb 377] [--trials 16]
"""

import argparse
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
from el_server import el_serve

from envloop.core.trajectory import (
    ModelRequestSummary,
    ModelStep,
    ToolCall,
    ToolStep,
    TrajectoryRecorder,
    UserStep,
    VerifierStep,
)
from envloop.services import datasets, job_submission, keys, profiles
from envloop.services.context import Context, open_context
from envloop.services.profiles import ProfileDocument, ProfileSpec
from envloop.services.trials import list_trials
from envloop.store.queue import refresh_job_status
from envloop.store.tables import Trial
from envloop.trajectories.caps import MAX_TRAJECTORY_BYTES
from envloop.trajectories.files import write_trajectory

MB = 1024 * 1024
PLACEHOLDER = "@@HUGE@@"


def _trials(ctx: Context, root: Path, count: int) -> list[str]:
    task = root / "tasks" / "big"
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text('version = "1.0"\n')
    (task / "instruction.md").write_text("Do it.\n")
    (task / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    ref = datasets.push_dataset(ctx, root / "tasks", "memory").ref
    document = ProfileDocument(
        schema_version="envplatform.profile/v2", spec=ProfileSpec(params={"AGENT_NAME": "nop"})
    )
    profiles.create_profile(ctx, "bench/nop", "1", document)
    request = job_submission.JobRequest(dataset=ref, profiles=["bench/nop@1"], attempts=count)
    job_id = job_submission.submit_job(ctx, request).job.id
    with ctx.store.write_connection() as conn:
        conn.execute(Trial.__table__.update().where(Trial.job_id == job_id).values(status="completed"))
        refresh_job_status(conn, job_id)
    return [view.id for view in list_trials(ctx, job_id)]


def _huge(path: Path, megabytes: int) -> None:
    """The older indented layout with one user step of `megabytes` MB, written in chunks."""
    recorder = TrajectoryRecorder("trl_bench", "envloop/shell@1", "command")
    recorder.add(UserStep(text=PLACEHOLDER))
    recorder.add(VerifierStep(command="bash /tests/test.sh", exit_code=0, reward=1.0))
    before, after = recorder.finish("done").model_dump_json(indent=1).split(PLACEHOLDER)
    with path.open("w") as handle:
        handle.write(before)
        block = "Follow these instructions carefully. " * (MB // 37)
        for _ in range(megabytes):
            handle.write(block)
        handle.write(after)


def _capped(directory: Path) -> Path:
    """The layout written now, as large as its cap lets it be."""
    recorder = TrajectoryRecorder("trl_bench", "envloop/shell@1", "envloop", "bench-model", "openai")
    recorder.add(UserStep(text="Make the tests pass."))
    request = ModelRequestSummary(protocol="openai", endpoint="http://m/v1", model="bench-model", messages=2)
    output = "".join(f"line {n} of the build output\n" for n in range(1100))
    turn = 0
    while len(output) * turn < MAX_TRAJECTORY_BYTES:
        turn += 1
        call = ToolCall(id=f"c{turn}", name="bash", arguments={"command": f"make step-{turn}"})
        recorder.add(ModelStep(request=request, text=f"Step {turn}.", tool_calls=[call]))
        recorder.add(
            ToolStep(call_id=call.id, tool="bash", command=f"make step-{turn}", exit_code=0, stdout=output)
        )
    recorder.add(VerifierStep(command="bash /tests/test.sh", exit_code=0, reward=1.0))
    return write_trajectory(directory, recorder.finish("done"), [])


def _place(ctx: Context, source: Path, trial_ids: list[str]) -> None:
    for trial_id in trial_ids:
        directory = ctx.artifacts.trial_dir(trial_id)
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / "trajectory.json"
        target.unlink(missing_ok=True)
        os.link(source, target)


class Peak:
    """The process's peak RSS while a block runs, sampled every 10 ms."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)

    def rss(self) -> int:
        return int(self.process.memory_info().rss)

    @contextmanager
    def watch(self) -> Iterator[list[int]]:
        found = [self.rss()]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                found.append(self.rss())
                time.sleep(0.01)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            yield found
        finally:
            stop.set()
            sampler.join()


def _stream(client: httpx.Client, path: str, **params: str) -> int:
    size = 0
    with client.stream("GET", path, params=params) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            size += len(chunk)
    return size


def _pages(client: httpx.Client, trial_id: str) -> int:
    offset: int | None = 0
    pages = 0
    while offset is not None:
        response = client.get(f"/v1/trials/{trial_id}/steps/page", params={"offset": offset})
        response.raise_for_status()
        offset = response.json()["next_offset"]
        pages += 1
    return pages


def _console(client: httpx.Client, trial_ids: list[str]) -> int:
    for trial_id in trial_ids:
        client.get(f"/trials/{trial_id}/trace").raise_for_status()
        client.get(f"/trials/{trial_id}/trace/step/0").raise_for_status()
        client.get(f"/trials/{trial_id}/trace/step/0/text", params={"field": "text"})
    return len(trial_ids)


def _measure(label: str, peak: Peak, work: Callable[[], object]) -> None:
    before = peak.rss()
    started = time.perf_counter()
    with peak.watch() as samples:
        work()
    growth = (max(samples) - before) / MB
    print(f"  {label:<52} peak RSS growth {growth:7.1f} MB   ({time.perf_counter() - started:5.1f} s)")


def _at_once(client_for: Callable[[], httpx.Client], trial_id: str) -> None:
    def one(path: str, **params: str) -> None:
        with client_for() as client:
            _stream(client, path, **params)

    threads = [
        threading.Thread(target=one, args=(f"/v1/trials/{trial_id}/steps",)),
        threading.Thread(target=one, args=(f"/v1/trials/{trial_id}/steps",), kwargs={"format": "atif"}),
        threading.Thread(target=_pages_with, args=(client_for, trial_id)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _pages_with(client_for: Callable[[], httpx.Client], trial_id: str) -> None:
    with client_for() as client:
        _pages(client, trial_id)


def _operations(peak: Peak, client: Callable[[], httpx.Client], trial_ids: list[str]) -> None:
    first = trial_ids[0]
    with client() as http:
        _measure("step pages, first to last", peak, lambda: _pages(http, first))
        _measure(
            "whole trajectory streamed (/steps)", peak, lambda: _stream(http, f"/v1/trials/{first}/steps")
        )
        atif = f"/v1/trials/{first}/steps"
        _measure(
            "ATIF export streamed (/steps?format=atif)", peak, lambda: _stream(http, atif, format="atif")
        )
        _measure("the three at once", peak, lambda: _at_once(client, first))
        console = f"console trace viewer of {len(trial_ids)} trials"
        _measure(console, peak, lambda: _console(http, trial_ids))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--huge-mb", type=int, default=377)
    parser.add_argument("--trials", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envloop-bench-memory-") as tmp:
        root = Path(tmp)
        home = root / "home"
        env = {**os.environ, "ENVLOOP_HOME": str(home)}
        env.pop("ENVLOOP_DATABASE_URL", None)
        env.pop("ENVLOOP_ARTIFACTS", None)
        ctx = open_context(home)
        trial_ids = _trials(ctx, root, args.trials)
        key = keys.create_key(ctx, "bench").key
        huge = root / "huge.json"
        _huge(huge, args.huge_mb)
        capped = _capped(root)
        sources = {"huge, older layout, one step": huge, "capped, the layout written now": capped}
        with el_serve(env) as (url, pid):
            peak = Peak(pid)

            def client() -> httpx.Client:
                return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=600)

            with client() as http:
                http.get("/").raise_for_status()  # warm: templates, routes
            print(f"server RSS at rest: {peak.rss() / MB:.0f} MB")
            for name, source in sources.items():
                _place(ctx, source, trial_ids)
                print(f"trajectory of {source.stat().st_size / MB:.0f} MB ({name}):")
                _operations(peak, client, trial_ids)
            print(f"server RSS at the end: {peak.rss() / MB:.0f} MB")
        ctx.close()


if __name__ == "__main__":
    main()
