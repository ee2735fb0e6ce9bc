"""Trajectories: typed ordered steps, masked on write, read back, exported to ATIF, rendered; and
the working-directory changes a tool step records."""

import json
import os
import stat
from pathlib import Path

from envloop.core.trajectory import (
    FileChange,
    ModelRequestSummary,
    ModelStep,
    ScoreStep,
    StateStep,
    SystemStep,
    ToolCall,
    ToolStep,
    Trajectory,
    TrajectoryRecorder,
    Usage,
    UserStep,
    usage_totals,
)
from envloop.trajectories import (
    changes_between,
    describe_trajectory,
    read_trajectory,
    snapshot,
    to_atif,
    write_trajectory,
)
from envloop.trajectories.workspace import snapshot_at

SUMMARY = ModelRequestSummary(
    protocol="openai", endpoint="http://e/v1", model="m", messages=1, tools=["bash"]
)


def agent_run() -> Trajectory:
    recorder = TrajectoryRecorder("trl_1", "envloop/shell@1", agent="envloop", model="m", protocol="openai")
    recorder.add(SystemStep(text="You are an agent."))
    recorder.add(UserStep(text="Create hello.txt"))
    call = ToolCall(id="call_1", name="bash", arguments={"command": "echo hi > hello.txt"})
    recorder.add(
        ModelStep(
            request=SUMMARY,
            text="Creating it.",
            tool_calls=[call],
            stop="tool_calls",
            usage=Usage(input_tokens=20, output_tokens=7),
        )
    )
    created = FileChange(
        path="hello.txt",
        change="created",
        size=3,
        diff="--- /dev/null\n+++ b/hello.txt\n@@ -0,0 +1 @@\n+hi\n",
    )
    recorder.add(
        ToolStep(call_id="call_1", tool="bash", command="echo hi > hello.txt", exit_code=0, changes=[created])
    )
    recorder.add(
        ModelStep(
            request=SUMMARY,
            text="Done.",
            stop="end",
            attempts=3,
            usage=Usage(input_tokens=40, output_tokens=2, cache_read_tokens=16),
        )
    )
    return recorder.finish("done")


def test_steps_are_numbered_in_order_and_tokens_summed() -> None:
    trajectory = agent_run()
    assert [s.index for s in trajectory.steps] == [0, 1, 2, 3, 4]
    assert [s.kind for s in trajectory.steps] == ["system", "user", "model", "tool", "model"]
    assert (trajectory.usage.input_tokens, trajectory.usage.output_tokens) == (60, 9)
    assert trajectory.stop_reason == "done" and trajectory.ended_at is not None
    assert usage_totals(trajectory) == {
        "calls": 2,
        "retries": 2,
        "input_tokens": 60,
        "output_tokens": 9,
        "cache_read_tokens": 16,
    }


def test_a_trajectory_reads_back_typed_from_its_file(tmp_path: Path) -> None:
    trajectory = agent_run()
    path = write_trajectory(tmp_path, trajectory, secrets=())
    assert path == tmp_path / "trajectory.json"
    again = read_trajectory(path)
    assert again == trajectory
    assert isinstance(again.steps[3], ToolStep) and again.steps[3].changes[0].path == "hello.txt"


def test_secrets_are_masked_as_written_and_as_json_escapes_them(tmp_path: Path) -> None:
    plain, awkward = "sk-plain-123", 'sk-"quoted"\\slash'
    recorder = TrajectoryRecorder("trl_2", "envloop/chat@1", agent="chat")
    recorder.add(UserStep(text=f"use {plain}"))
    recorder.add(
        ModelStep(request=SUMMARY, text=f"my key is {awkward} and {plain}", error=f"401: bad {awkward}")
    )
    path = write_trajectory(tmp_path, recorder.finish("model_error"), secrets=(plain, awkward))
    raw = path.read_text()
    assert plain not in raw and json.dumps(awkward)[1:-1] not in raw and awkward not in raw
    kept = read_trajectory(path)
    assert kept.steps[1].text == "my key is *** and ***"  # type: ignore[union-attr]
    assert not list(tmp_path.glob(".*.part"))


def test_atif_export_folds_tool_results_into_the_calling_step() -> None:
    atif = to_atif(agent_run())
    assert atif["schema_version"] == "ATIF-v1.7"
    assert atif["session_id"] == "trl_1"
    assert atif["agent"] == {"name": "envloop", "version": "envloop/shell@1", "model_name": "m"}
    steps = atif["steps"]
    assert [s["step_id"] for s in steps] == [1, 2, 3, 4]
    assert [s["source"] for s in steps] == ["system", "user", "agent", "agent"]
    calling = steps[2]
    assert calling["tool_calls"] == [
        {"tool_call_id": "call_1", "function_name": "bash", "arguments": {"command": "echo hi > hello.txt"}}
    ]
    [result] = calling["observation"]["results"]
    assert result["source_call_id"] == "call_1"
    assert result["extra"]["exit_code"] == 0
    assert result["extra"]["changes"][0]["path"] == "hello.txt"
    assert calling["metrics"] == {"prompt_tokens": 20, "completion_tokens": 7, "cached_tokens": 0}
    assert atif["final_metrics"] == {
        "total_prompt_tokens": 60,
        "total_completion_tokens": 9,
        "total_cached_tokens": 16,
        "total_steps": 4,
    }
    assert atif["extra"]["stop_reason"] == "done"
    json.dumps(atif)


def test_score_and_state_steps_export_as_system_steps() -> None:
    recorder = TrajectoryRecorder("trl_3", "envloop/chat@1", agent="chat")
    recorder.add(StateStep(note="after the agent command", changes=[FileChange(path="x", change="deleted")]))
    recorder.add(ScoreStep(scorer="exact", expected="4", answer="4", reward=1.0, explanation="equal"))
    steps = to_atif(recorder.finish("done"))["steps"]
    assert [s["source"] for s in steps] == ["system", "system"]
    assert steps[1]["message"] == "exact: reward 1 (equal)"
    assert steps[1]["extra"]["answer"] == "4"


def test_rendered_steps_show_calls_commands_results_and_diffs() -> None:
    text = "\n".join(describe_trajectory(agent_run()))
    assert "#2 model" in text and "tokens in 20 / out 7  stop tool_calls" in text
    assert '→ bash {"command": "echo hi > hello.txt"}  [call_1]' in text
    assert "#3 tool" in text and "exit 0" in text and "$ echo hi > hello.txt" in text
    assert "created hello.txt (3 bytes)" in text and "+hi" in text
    assert "(3 attempts)" in text
    assert text.splitlines()[-1] == "stop done  tokens in 60 / out 9"


def test_long_texts_are_cut_when_rendered() -> None:
    recorder = TrajectoryRecorder("trl_4", "envloop/chat@1", agent="chat")
    recorder.add(UserStep(text="\n".join(f"line {i}" for i in range(100))))
    lines = describe_trajectory(recorder.finish("done"))
    assert any("60 more lines" in line for line in lines)


def test_workspace_changes_list_created_modified_and_deleted_files_with_diffs(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("same\n")
    (tmp_path / "edit.txt").write_text("one\ntwo\n")
    (tmp_path / "gone.txt").write_text("bye\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref\n")
    before = snapshot(tmp_path)
    (tmp_path / "edit.txt").write_text("one\nTWO\n")
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "new.txt").write_text("hello\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / ".git" / "HEAD").write_text("other\n")
    changes = {c.path: c for c in changes_between(before, snapshot(tmp_path, previous=before))}
    assert set(changes) == {"edit.txt", "gone.txt", "sub/new.txt", "blob.bin"}
    assert changes["edit.txt"].change == "modified"
    assert changes["edit.txt"].diff is not None and "-two\n+TWO\n" in changes["edit.txt"].diff
    assert changes["gone.txt"].change == "deleted" and changes["gone.txt"].size is None
    assert changes["sub/new.txt"].change == "created" and "+hello" in (changes["sub/new.txt"].diff or "")
    assert changes["blob.bin"].binary and changes["blob.bin"].diff is None


def test_a_symlink_is_recorded_as_a_link_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("host secret\n")
    work = tmp_path / "work"
    work.mkdir()
    before = snapshot(work)
    (work / "link").symlink_to(outside)
    [change] = changes_between(before, snapshot(work))
    assert change.path == "link" and change.change == "created"
    assert "host secret" not in (change.diff or "")
    assert str(outside) in (change.diff or "")


def test_a_same_size_rewrite_within_one_clock_tick_is_still_seen(tmp_path: Path) -> None:
    target = tmp_path / "state.txt"
    target.write_text("aaaa\n")
    before = snapshot(tmp_path)
    stamp = target.stat().st_mtime_ns
    target.write_text("bbbb\n")
    os.utime(target, ns=(stamp, stamp))  # what a coarse file clock shows for two writes in one tick
    [change] = changes_between(before, snapshot(tmp_path, previous=before))
    assert change.path == "state.txt" and change.diff is not None and "+bbbb" in change.diff


def test_a_link_to_a_directory_is_recorded_and_not_entered(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "dir-link").symlink_to(outside)
    assert set(snapshot(work)) == {"dir-link"}


def test_fifos_and_device_nodes_are_neither_waited_on_nor_opened(tmp_path: Path) -> None:
    """A command may leave a FIFO (reading it would hang the worker) or, as root in a container, a
    device node (opening one from the host could act on the host's device): neither is read."""
    work = tmp_path / "work"
    work.mkdir()
    os.mkfifo(work / "pipe")
    os.mknod(work / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    (work / "kept.txt").write_text("kept\n")
    assert set(snapshot(work)) == {"kept.txt"}


def test_a_directory_swapped_for_a_link_during_the_walk_is_not_followed(tmp_path: Path) -> None:
    """The walk holds each directory by its descriptor: the tree it was given is what it reads,
    even when a name is replaced by a link to elsewhere once the walk has it open."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret\n")
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "mine.txt").write_text("mine\n")
    directory = os.open(work / "sub", os.O_RDONLY | os.O_DIRECTORY)
    try:
        (work / "sub").rename(tmp_path / "moved")
        (work / "sub").symlink_to(outside)
        states = snapshot_at(directory)
    finally:
        os.close(directory)
    assert set(states) == {"mine.txt"}
    assert set(snapshot(work)) == {"sub"}
