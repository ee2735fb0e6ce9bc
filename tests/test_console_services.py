"""The small services the console reads through: a window of a trial's kept file, never splitting a
character; the reward histogram, counting only counted rewards, in real bins on the rewards' axis."""

import subprocess
import sys
from pathlib import Path

import pytest

from envloop.console.charts import histogram_chart
from envloop.core.metrics import AttemptSlot, compute_metrics
from envloop.errors import UserError
from envloop.services import datasets, job_submission, profiles, trial_files
from envloop.services.context import Context
from envloop.services.distribution import RewardHistogram, reward_histogram
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
    job = job_submission.submit_job(ctx, job_submission.JobRequest(dataset=ref, profiles=["t/nop@1"])).job
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
    assert histogram.scored == 3 and histogram.rates
    assert [(b.value, b.count) for b in histogram.bars if b.count] == [(0.0, 1), (1.0, 2)]


def _histogram(rewards: list[float]) -> RewardHistogram:
    slots = [AttemptSlot(f"t{i}", 1, "scored", r) for i, r in enumerate(rewards)]
    return reward_histogram(compute_metrics([f"t{i}" for i in range(len(rewards))], 1, slots))


def test_rates_fall_in_ten_real_bins_by_value_never_side_by_side_as_categories() -> None:
    """0.3 and 0.333 share the bin [30%, 40%); 0.4 starts the next; empty bins keep their place."""
    histogram = _histogram([0.3, 1 / 3, 0.4, 0.7, 1.0])
    assert len(histogram.bars) == 10
    assert [b.count for b in histogram.bars] == [0, 0, 0, 2, 1, 0, 0, 1, 0, 1]
    assert histogram.bars[3].value is None and histogram.bars[4].value == 0.4
    chart = histogram_chart(histogram)
    assert [b.label for b in chart.bars if b.count] == ["30% – 40%", "40%", "70%", "100%"]
    assert [t.label for t in chart.x_ticks] == ["0%", "20%", "40%", "60%", "80%", "100%"]
    # Positions follow the values: the bin of 0.7 lies right of the bin of 0.4, with empty bins between.
    xs = [b.x for b in chart.bars]
    assert xs == sorted(xs) and xs[7] - xs[4] == pytest.approx(3 * (xs[1] - xs[0]))


def test_a_dozen_distinct_rewards_keep_every_label_and_count() -> None:
    rewards = [i / 11 for i in range(12)] + [1.0, 0.5]
    chart = histogram_chart(_histogram(rewards))
    assert sum(b.count for b in chart.bars) == len(rewards)
    assert all(b.label for b in chart.bars if b.count)


def test_rewards_on_their_own_scale_get_round_bins_covering_them() -> None:
    histogram = _histogram([i / 2 for i in range(30)])
    assert not histogram.rates and sum(b.count for b in histogram.bars) == 30
    assert [(b.low, b.high) for b in histogram.bars[:2]] == [(0.0, 2.0), (2.0, 4.0)]
    assert histogram.bars[-1].high >= 14.5 and len(histogram.bars) == 8
    single = _histogram([3.5, 3.5])
    assert [(b.low, b.count, b.value) for b in single.bars] == [(3.5, 2, 3.5)]


@pytest.mark.parametrize("module", ["envloop.console", "envloop.console.access", "envloop.api"])
def test_the_console_and_the_api_import_in_either_order(module: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
