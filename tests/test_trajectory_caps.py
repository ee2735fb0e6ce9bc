"""Sizes that cannot take the server down: a kept trajectory holds each step within MAX_STEP_BYTES
(long texts cut in the middle, saying so), the whole within MAX_TRAJECTORY_BYTES and
MAX_TRAJECTORY_STEPS (first and last steps kept, a `cut` step between them), and an instruction
over MAX_INSTRUCTION_BYTES is refused at push, naming the task and the cap."""

import io
import json
import tarfile
from pathlib import Path

from envloop.core.trajectory import (
    CutStep,
    ModelRequestSummary,
    ModelStep,
    ToolStep,
    TrajectoryRecorder,
    UserStep,
    VerifierStep,
)
from envloop.tasks.model import MAX_INSTRUCTION_BYTES
from envloop.trajectories import read_trajectory, write_trajectory
from envloop.trajectories.caps import MAX_STEP_BYTES, MAX_TRAJECTORY_BYTES, MAX_TRAJECTORY_STEPS
from tests.api_server import Server
from tests.conftest import El, make_task

SUMMARY = ModelRequestSummary(protocol="openai", endpoint="http://m/v1", model="m", messages=1)
MIB = 1024 * 1024


def test_a_step_over_its_cap_keeps_the_head_and_tail_of_its_long_texts(tmp_path: Path) -> None:
    recorder = TrajectoryRecorder("trl_big", "envloop/shell@1", agent="envloop")
    stdout = "first line\n" + "x" * (3 * MIB) + "\nlast line"
    recorder.add(ToolStep(call_id="c", tool="bash", command="yes", exit_code=0, stdout=stdout, stderr="oops"))
    path = write_trajectory(tmp_path, recorder.finish("done"), secrets=())
    [step] = read_trajectory(path).steps
    assert isinstance(step, ToolStep)
    assert len(step.model_dump_json()) <= MAX_STEP_BYTES
    assert step.stdout.startswith("first line\n") and step.stdout.endswith("\nlast line")
    assert "characters cut here" in step.stdout and step.output_truncated
    assert (step.stderr, step.command, step.exit_code) == ("oops", "yes", 0)  # short texts untouched


def test_a_step_that_cannot_fit_becomes_a_cut_step_saying_so(tmp_path: Path) -> None:
    recorder = TrajectoryRecorder("trl_keys", "envloop/shell@1", agent="envloop")
    recorder.add(ToolStep(call_id="c", tool="bash", arguments={f"k{n}": n for n in range(200_000)}))
    recorder.add(VerifierStep(command="bash /tests/test.sh", exit_code=0, reward=1.0))
    steps = read_trajectory(write_trajectory(tmp_path, recorder.finish("done"), secrets=())).steps
    assert isinstance(steps[0], CutStep) and steps[0].steps == 1 and steps[0].bytes > MAX_STEP_BYTES
    assert "tool step" in steps[0].note
    assert isinstance(steps[1], VerifierStep) and steps[1].reward == 1.0


def test_a_trajectory_over_its_step_cap_keeps_its_first_and_last_steps_around_a_cut(tmp_path: Path) -> None:
    recorder = TrajectoryRecorder("trl_long", "envloop/shell@1", agent="envloop")
    for number in range(MAX_TRAJECTORY_STEPS + 500):
        recorder.add(ModelStep(request=SUMMARY, text=f"thought {number}"))
    recorder.add(VerifierStep(command="bash /tests/test.sh", exit_code=0, reward=0.5))
    trajectory = recorder.finish("max_steps")
    steps = read_trajectory(write_trajectory(tmp_path, trajectory, secrets=())).steps
    assert len(steps) == MAX_TRAJECTORY_STEPS
    assert [step.index for step in steps] == list(range(len(steps)))
    cuts = [step for step in steps if isinstance(step, CutStep)]
    assert len(cuts) == 1 and cuts[0].steps == len(trajectory.steps) - len(steps) + 1
    assert steps[0].text == "thought 0"  # type: ignore[union-attr]
    assert isinstance(steps[-1], VerifierStep) and steps[-1].reward == 0.5


def test_a_trajectory_over_its_byte_cap_is_cut_within_it(tmp_path: Path) -> None:
    recorder = TrajectoryRecorder("trl_wide", "envloop/shell@1", agent="envloop")
    recorder.add(UserStep(text="do it"))
    for number in range(MAX_TRAJECTORY_BYTES // (MIB // 2) + 20):
        recorder.add(ToolStep(call_id=f"c{number}", tool="bash", stdout="x" * (MIB // 2)))
    recorder.add(VerifierStep(command="bash /tests/test.sh", exit_code=1, reward=0.0))
    path = write_trajectory(tmp_path, recorder.finish("done"), secrets=())
    assert path.stat().st_size <= MAX_TRAJECTORY_BYTES
    steps = read_trajectory(path).steps
    [cut] = [step for step in steps if isinstance(step, CutStep)]
    assert cut.bytes > 0 and "left out" in cut.note
    assert isinstance(steps[0], UserStep) and isinstance(steps[-1], VerifierStep)


def test_an_instruction_over_the_cap_is_refused_at_push_naming_the_task_and_the_cap(
    el: El, tmp_path: Path
) -> None:
    task = make_task(tmp_path / "tasks", "wordy")
    (task / "instruction.md").write_text("Do it. " * (MAX_INSTRUCTION_BYTES // 7 + 10))
    refused = el("dataset", "push", str(tmp_path / "tasks"), "--name", "wordy")
    assert refused.code == 2
    [line] = refused.stderr.strip().splitlines()
    assert "wordy/instruction.md" in line and f"longer than the {MAX_INSTRUCTION_BYTES} bytes" in line
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"prompt": "x" * (MAX_INSTRUCTION_BYTES + 1), "answer": "y"}) + "\n")
    refused = el("dataset", "push", str(rows), "--name", "rows")
    assert refused.code == 2 and f"longer than the {MAX_INSTRUCTION_BYTES} bytes" in refused.stderr
    assert el.ok("dataset", "list", "--json").json() == []


def test_a_small_upload_unpacking_to_a_huge_instruction_is_refused_with_400(
    server: Server, tmp_path: Path
) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        task = make_task(tmp_path / "tasks", "bomb")
        (task / "instruction.md").write_bytes(b"a" * (64 * MIB))
        tar.add(task, arcname="bomb")
    assert len(buffer.getvalue()) < 200_000
    with server.http() as http:
        upload = {"archive": ("bomb.tar.gz", buffer.getvalue())}
        refused = http.post("/v1/datasets", data={"name": "bomb"}, files=upload)
    assert refused.status_code == 400, refused.text
    detail = refused.json()["detail"]
    assert detail.startswith("bomb/instruction.md: ") and f"{MAX_INSTRUCTION_BYTES} bytes" in detail
