"""A large trajectory is read a page at a time by every surface: the API's step pages (bounded in
steps and bytes), its whole-trajectory and ATIF streams, the console's trace viewer and
`el trial get --steps`; a trajectory kept in the older indented layout reads the same way, a step
too large to read showing as a `cut` step."""

import json
from pathlib import Path

import pytest

from envloop.core.trajectory import (
    CutStep,
    ModelRequestSummary,
    ModelStep,
    ToolCall,
    ToolStep,
    Trajectory,
    TrajectoryRecorder,
    UserStep,
    VerifierStep,
)
from envloop.services import trials
from envloop.services.context import Context
from envloop.trajectories import read_trajectory, to_atif, write_trajectory
from envloop.trajectories.pages import PAGE_BYTES, open_outline
from envloop.wire import PAGE_STEPS
from tests.api_server import Server
from tests.test_compare_support import make_profile, push_tasks, run_job

SUMMARY = ModelRequestSummary(protocol="openai", endpoint="http://m/v1", model="m", messages=1)
STEPS = 1500


def large_trajectory(trial_id: str) -> Trajectory:
    """STEPS model calls, each with its tool result of 16 KB: about 25 MB kept."""
    recorder = TrajectoryRecorder(trial_id, "envloop/shell@1", agent="envloop", model="m")
    recorder.add(UserStep(text="count"))
    for number in range(STEPS):
        call = ToolCall(id=f"call_{number}", name="bash", arguments={"command": f"seq {number}"})
        recorder.add(ModelStep(request=SUMMARY, text=f"step {number}", tool_calls=[call]))
        recorder.add(ToolStep(call_id=call.id, tool="bash", command=f"seq {number}", exit_code=0,
                              stdout=f"{number}\n" * 4000))  # fmt: skip
    recorder.add(VerifierStep(command="bash /tests/test.sh", exit_code=0, reward=1.0))
    return recorder.finish("done")


def _trial(ctx: Context, tmp_path: Path) -> str:
    dataset = push_tasks(ctx, tmp_path, "pages", ["a"])
    job = run_job(ctx, dataset, [make_profile(ctx, tmp_path, "team/agent")], 1, lambda *_: 1.0)
    return trials.list_trials(ctx, job)[0].id


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_large_trajectory_is_served_a_page_at_a_time_and_streamed_whole(
    ctx: Context, server: Server, tmp_path: Path
) -> None:
    trial_id = _trial(ctx, tmp_path)
    kept = ctx.artifacts.trial_dir(trial_id)
    kept.mkdir(parents=True)
    path = write_trajectory(kept, large_trajectory(trial_id), secrets=())
    whole = read_trajectory(path)
    assert path.stat().st_size > 20 * 1024 * 1024

    seen, pages, offset = [], 0, 0
    with server.http() as http:
        while offset is not None:
            answer = http.get(f"/v1/trials/{trial_id}/steps/page", params={"offset": offset})
            assert answer.status_code == 200
            page = answer.json()
            assert len(page["steps"]) <= PAGE_STEPS
            assert len(answer.content) <= PAGE_BYTES + 64 * 1024  # the page's budget and its head
            assert page["total"] == len(whole.steps) and page["trajectory"]["steps"] == []
            seen += page["steps"]
            offset, pages = page["next_offset"], pages + 1
        assert pages > 5
        assert seen == [step.model_dump(mode="json") for step in whole.steps]
        streamed = http.get(f"/v1/trials/{trial_id}/steps")
        assert streamed.content == path.read_bytes()
        atif = http.get(f"/v1/trials/{trial_id}/steps", params={"format": "atif"}).json()
        assert atif == json.loads(json.dumps(to_atif(whole)))
        refused = http.get(f"/v1/trials/{trial_id}/steps/page", params={"limit": PAGE_STEPS + 1})
        assert refused.status_code == 400
        trace = http.get(f"/trials/{trial_id}/trace", params={"step": 2000}).text
        assert f"step 2001 of {len(whole.steps)}" in trace and "seq 999" in trace
        detail = http.get(f"/trials/{trial_id}/trace/step/2000").text
        assert "called at step 2000" in detail  # its call, found among the steps before it

    printed = server.el.ok("trial", "get", trial_id, "--steps").stdout
    assert printed.count(" model ") == STEPS and f"#{len(whole.steps) - 1} verifier" in printed
    kept = server.el.ok("trial", "get", trial_id, "--steps", "--json").json()["trajectory"]
    assert Trajectory.model_validate(kept) == whole


def test_the_older_indented_layout_reads_a_step_at_a_time_and_a_huge_step_shows_as_cut(
    tmp_path: Path,
) -> None:
    recorder = TrajectoryRecorder("trl_old", "envloop/shell@1", agent="command")
    recorder.add(UserStep(text="x" * (3 * 1024 * 1024)))  # what a 400 MB instruction once made
    recorder.add(ToolStep(call_id="c", tool="bash", command="ls", exit_code=0, stdout="a\nb"))
    recorder.add(VerifierStep(command="bash /tests/test.sh", exit_code=0, reward=0.0))
    trajectory = recorder.finish("done")
    path = tmp_path / "trajectory.json"
    path.write_text(trajectory.model_dump_json(indent=1))  # as envloop wrote it before
    outline = open_outline(path)
    assert (outline.total, outline.head.trial_id, outline.head.steps) == (3, "trl_old", [])
    first, *rest = outline.steps(0)
    assert isinstance(first, CutStep) and first.bytes > 3 * 1024 * 1024 and first.at == trajectory.steps[0].at
    assert rest == trajectory.steps[1:]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_trial_that_kept_twenty_thousand_files_lists_them_a_page_at_a_time(
    ctx: Context, server: Server, tmp_path: Path
) -> None:
    trial_id = _trial(ctx, tmp_path)
    logs = ctx.artifacts.trial_dir(trial_id) / "agent"
    for folder in ("a", "a-b", "b"):
        (logs / folder).mkdir(parents=True)
        for number in range(9000 if folder != "a-b" else 2000):
            (logs / folder / f"f{number:05d}.txt").write_text("x")
    (logs / "a0.txt").write_text("between a/ and a-b/ as paths sort")
    expected = sorted(str(p.relative_to(logs.parent)) for p in logs.rglob("*") if p.is_file())
    page = trials.artifact_page(ctx, trial_id, 0, 1000)
    assert (page.total, page.next_offset) == (len(expected), 1000)
    listed, offset = [], 0
    while offset is not None:
        page = trials.artifact_page(ctx, trial_id, offset, 1000)
        listed += [item.path for item in page.items]
        offset = page.next_offset
    assert listed == expected == [item.path for item in trials.list_artifacts(ctx, trial_id)]
    with server.http() as http:
        first = http.get(f"/trials/{trial_id}/artifacts")
        last = http.get(f"/trials/{trial_id}/artifacts", params={"offset": 20000})
    assert first.status_code == 200 and len(first.content) < 400_000
    assert f"Files 1 to 500 of {len(expected)}" in first.text and 'href="?offset=500"' in first.text
    assert len(expected) == 20_001 and "Files 20001 to 20001 of 20001" in last.text
    assert 'href="?offset=19500"' in last.text and "next</a>" not in last.text
