"""Kept logs are capped (head and tail of a long one, the cut recorded) and secrets are masked in
every kept byte, file name and outcome field that can carry a trial's output."""

from pathlib import Path

import pytest

from envloop.core.masking import mask_outcome
from envloop.core.trial import TrialError, TrialOutcome
from envloop.environments import keeping as artifacts
from envloop.environments.keeping import copy_tree_masked, keep_tree, plain_tree

SECRET = "sk-kept-logs-93c1e0"
LIMIT = 1000


@pytest.fixture
def small_cap(monkeypatch: pytest.MonkeyPatch) -> int:
    """The real cap is 32 MiB; the rule is the same at 1,000 bytes and the test stays fast."""
    monkeypatch.setattr(artifacts, "MAX_KEPT_FILE_BYTES", LIMIT)
    return LIMIT


def test_a_long_log_keeps_its_head_and_tail_and_says_how_much_was_cut(tmp_path: Path, small_cap: int) -> None:
    source = tmp_path / "logs"
    source.mkdir()
    body = b"H" * 500 + b"M" * 9_000 + b"T" * 500
    (source / "stdout.txt").write_bytes(body)
    notes = keep_tree(source, tmp_path / "kept", [])
    kept = (tmp_path / "kept" / "stdout.txt").read_bytes()
    assert kept.startswith(b"H" * 500 + b"\n[envloop: 9,000 bytes of this 10,000-byte file were cut here]\n")
    assert kept.endswith(b"\n" + b"T" * 500) and b"M" not in kept
    assert notes == ["kept/stdout.txt: 9,000 bytes were cut from the middle of this log"]
    assert source.exists()  # a file too long to keep whole is copied, never moved


def test_a_log_within_the_cap_is_kept_whole_and_moved(tmp_path: Path, small_cap: int) -> None:
    source = tmp_path / "logs"
    source.mkdir()
    (source / "stdout.txt").write_bytes(b"x" * small_cap)
    assert plain_tree(source) is True
    assert keep_tree(source, tmp_path / "kept", []) == []
    assert (tmp_path / "kept" / "stdout.txt").read_bytes() == b"x" * small_cap
    (tmp_path / "kept" / "stdout.txt").write_bytes(b"x" * (small_cap + 1))
    assert plain_tree(tmp_path / "kept") is False


def test_logs_joining_captured_output_are_moved_in_beside_it_under_names_of_their_own(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "stdout.txt").write_text("captured by the worker\n")
    source = tmp_path / "logs"
    (source / "deeper").mkdir(parents=True)
    (source / "stdout.txt").write_text("written by the command\n")
    (source / "deeper" / "trace.txt").write_text("trace\n")
    assert keep_tree(source, kept, []) == []
    assert (kept / "stdout.txt").read_text() == "captured by the worker\n"
    assert (kept / "stdout.txt.2").read_text() == "written by the command\n"
    assert (kept / "deeper" / "trace.txt").read_text() == "trace\n"
    assert not source.exists()


def test_logs_joining_captured_output_are_copied_masked_when_a_secret_is_set(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.mkdir()
    source = tmp_path / "logs"
    source.mkdir()
    (source / "agent.log").write_text(f"key={SECRET}\n")
    assert keep_tree(source, kept, [SECRET]) == []
    assert SECRET not in (kept / "agent.log").read_text()
    assert source.exists()  # copied, never moved: the unmasked original is the caller's to remove


@pytest.mark.parametrize("offset", [497, 500, 503, 9_496, 9_500, 9_503])
def test_a_secret_cut_in_two_by_the_cap_is_masked_on_both_sides(
    tmp_path: Path, small_cap: int, offset: int
) -> None:
    """Head ends at byte 500 and tail starts at 9,500: a secret across either edge leaves no piece."""
    body = bytearray(b"." * 10_000)
    body[offset : offset + len(SECRET)] = SECRET.encode()
    source = tmp_path / "logs"
    source.mkdir()
    (source / "out.bin").write_bytes(bytes(body))
    keep_tree(source, tmp_path / "kept", [SECRET])
    kept = (tmp_path / "kept" / "out.bin").read_bytes()
    for size in range(4, len(SECRET) + 1):
        for start in range(len(SECRET) - size + 1):
            assert SECRET[start : start + size].encode() not in kept, (offset, start, size)


def test_secrets_are_masked_in_kept_file_names(tmp_path: Path) -> None:
    source = tmp_path / "logs"
    (source / f"dir-{SECRET}").mkdir(parents=True)
    (source / f"dir-{SECRET}" / f"note-{SECRET}.txt").write_text(f"{SECRET}\n")
    (source / "dir-***").mkdir()
    (source / "dir-***" / "note-***.txt").write_text("plain\n")
    kept = copy_tree_masked(source, tmp_path / "kept", [SECRET])
    names = sorted(p.relative_to(tmp_path / "kept").as_posix() for p in (tmp_path / "kept").rglob("*.txt*"))
    assert kept.copied == 2 and all(SECRET not in name for name in names)
    assert len(names) == 2 and names[0].startswith("dir-***/note-***.txt")


def test_every_outcome_field_that_carries_trial_output_is_masked() -> None:
    outcome = TrialOutcome(
        status="failed",
        error=TrialError(
            type="verifier_error", message=f"reward.txt is not a decimal number: 'score for {SECRET}'"
        ),
        reward_note=f"score for {SECRET}",
        dimensions={SECRET: 0.5, "***": 0.25, "speed": 1.0},
        warnings=[f"task asked for {SECRET}"],
        sandbox_note=f"note {SECRET}",
        stop_reason=f"stopped at {SECRET}",
    )
    masked = mask_outcome(outcome, [SECRET, ""])
    assert SECRET not in masked.model_dump_json()
    assert masked.reward_note == "score for ***"
    assert masked.error is not None and masked.error.message.endswith("'score for ***'")
    assert sorted(masked.dimensions.values()) == [0.25, 0.5, 1.0] and "speed" in masked.dimensions
    assert mask_outcome(outcome, []) is outcome
