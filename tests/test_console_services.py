"""The small services the console reads through: a window of a trial's kept file, never splitting a
character; the reward histogram, counting only counted rewards."""

import subprocess
import sys
from pathlib import Path

import pytest

from envloop.core.metrics import AttemptSlot, compute_metrics
from envloop.services import datasets, jobs, profiles, trial_files
from envloop.services.context import Context
from envloop.services.distribution import reward_histogram
from envloop.services.errors import UserError
from envloop.services.profiles import ProfileDocument, ProfileSpec
from envloop.services.trials import list_trials
from envloop.store.artifacts import ArtifactNotFoundError
from tests.conftest import make_task


@pytest.fixture
def trial_id(ctx: Context, tmp_path: Path) -> str:
    make_task(tmp_path / "tasks", "one")
    ref = datasets.push_dataset(ctx, tmp_path / "tasks", "files").ref
    document = ProfileDocument(
        schema_version="envplatform.profile/v2", spec=ProfileSpec(params={"AGENT_NAME": "nop"})
    )
    profiles.create_profile(ctx, "t/nop", "1", document)
    job = jobs.submit_job(ctx, jobs.JobRequest(dataset=ref, profiles=["t/nop@1"])).job
    return list_trials(ctx, job.id)[0].id


def _write(ctx: Context, trial_id: str, relpath: str, data: bytes) -> None:
    path = ctx.artifacts.trial_dir(trial_id) / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_windows_of_a_log_never_split_a_character_and_join_to_the_whole(ctx: Context, trial_id: str) -> None:
    text = "".join(f"{i} é€😀\n" for i in range(500))
    _write(ctx, trial_id, "agent/stdout.txt", text.encode())
    pieces, offset = [], 0
    while True:
        window = trial_files.read_window(ctx, trial_id, "agent/stdout.txt", offset, limit=97)
        assert "\ufffd" not in window.text
        pieces.append(window.text)
        if window.next_offset is None:
            break
        assert window.next_offset > offset
        offset = window.next_offset
    assert "".join(pieces) == text
    # An offset inside a character starts at that character.
    middle = trial_files.read_window(ctx, trial_id, "agent/stdout.txt", len("0 é€".encode()) + 1, limit=8)
    assert middle.text.startswith("😀")


def test_a_binary_file_is_reported_not_decoded(ctx: Context, trial_id: str) -> None:
    _write(ctx, trial_id, "out.bin", b"\x00\x01\x02" * 100)
    window = trial_files.read_window(ctx, trial_id, "out.bin")
    assert window.binary and window.text == "" and window.size == 300


def test_a_window_outside_the_trials_files_is_refused(ctx: Context, trial_id: str) -> None:
    with pytest.raises(ArtifactNotFoundError):
        trial_files.read_window(ctx, trial_id, "../../envloop.db")
    with pytest.raises(UserError):
        trial_files.read_window(ctx, trial_id, "agent/stdout.txt", limit=0)


def test_the_histogram_counts_only_counted_rewards() -> None:
    slots = [
        AttemptSlot("A", 1, "scored", 1.0),
        AttemptSlot("A", 2, "scored", 0.0),
        AttemptSlot("B", 1, "scored", 1.0),
        AttemptSlot("B", 2, "invalid"),
        AttemptSlot("C", 1, "invalidated", 1.0),
    ]
    histogram = reward_histogram(compute_metrics(["A", "B", "C"], 2, slots))
    assert histogram.scored == 3
    assert [(b.low, b.count) for b in histogram.bars] == [(0.0, 1), (1.0, 2)]


def test_many_distinct_rewards_are_binned_between_the_smallest_and_largest() -> None:
    slots = [AttemptSlot(f"t{i}", 1, "scored", i / 2) for i in range(30)]
    histogram = reward_histogram(compute_metrics([f"t{i}" for i in range(30)], 1, slots))
    assert len(histogram.bars) == 10 and sum(b.count for b in histogram.bars) == 30
    assert histogram.bars[0].low == 0.0 and histogram.bars[-1].high == pytest.approx(14.5)


@pytest.mark.parametrize("module", ["envloop.console", "envloop.console.access", "envloop.api"])
def test_the_console_and_the_api_import_in_either_order(module: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
