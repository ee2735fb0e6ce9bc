"""Many files or directories are snapshotted and copied out without ever being held whole.

The workdir snapshot keeps the first `FILE_LIMIT` files by name; the walk behind it used to list
and sort each directory whole first, and copying a directory out of the local sandbox listed each
directory whole too, so an agent that made millions of files (`seq 1 3000000 | xargs touch`) grew
the worker's memory with them. The memory is measured for real (tracemalloc) on a directory far
larger than the limits set here, in an interpreter of its own: tracemalloc counts every thread of
a process, and a test process holds other tests' servers. The container's changes read for tamper
flags are bounded in test_docker_change_flood.py.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envloop.environments.keeping import KeepBudget, copy_tree_masked, plain_tree
from envloop.environments.tree_walk import MAX_AGENT_TREE_DEPTH
from envloop.trajectories import workspace
from envloop.trajectories.workspace import snapshot

FILES = 30_000

MEASURE = """
import json, sys, tracemalloc
from pathlib import Path
from envloop.environments.keeping import KeepBudget, copy_tree_masked
from envloop.trajectories import workspace
root, what = Path(sys.argv[1]), sys.argv[2]
workspace.FILE_LIMIT = 100
# Once on a directory of one file first: what loads on a first call (imports, compiled patterns)
# is not what a listing holds.
(root / "warm").mkdir()
(root / "warm" / "one").touch()
workspace.snapshot(root / "warm")
copy_tree_masked(root / "warm", root / "warm-copy", (), KeepBudget(files=1, bytes=1024))
budget = KeepBudget(files=1, bytes=1024)
tracemalloc.start()
if what == "snapshot":
    found = sorted(workspace.snapshot(root / "source"))
    answer = {"first": found[:2], "count": len(found)}
else:
    kept = copy_tree_masked(root / "source", root / "target", (), budget)
    answer = {"copied": kept.copied, "refused": budget.refused_files, "unwalked": budget.unwalked_directories}
answer["peak"] = tracemalloc.get_traced_memory()[1]
print(json.dumps(answer))
"""


def _flood(root: Path) -> None:
    flood = root / "source" / "flood"
    flood.mkdir(parents=True)
    for number in range(FILES):
        (flood / f"{number:06d}").touch()
    (root / "source" / "kept.txt").write_text("kept\n")


def _directories(root: Path) -> None:
    """FILES directories side by side, each holding one file: a walk that lists the directories it
    has still to enter holds a path for each."""
    flood = root / "source" / "flood"
    flood.mkdir(parents=True)
    for number in range(FILES):
        (flood / f"{number:06d}").mkdir()
        (flood / f"{number:06d}" / "f").touch()
    (root / "source" / "kept.txt").write_text("kept\n")


def _measured(root: Path, what: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(root), what],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def test_a_directory_of_many_files_is_listed_within_the_limit_by_name(tmp_path: Path) -> None:
    _flood(tmp_path)
    answer = _measured(tmp_path, "snapshot")
    assert answer["count"] == 100 and answer["first"] == ["flood/000000", "flood/000001"]
    # Reading a file takes a 1 MiB buffer; holding the whole listing took 7 MB more (an entry
    # object per file).
    assert isinstance(answer["peak"], int) and answer["peak"] < 3 * 1024 * 1024, answer


def test_the_walk_stops_after_its_entries_in_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for outer in range(20):
        for inner in range(20):
            (tmp_path / f"d{outer:02d}" / f"e{inner:02d}").mkdir(parents=True)
        (tmp_path / f"d{outer:02d}" / "file").touch()
    monkeypatch.setattr(workspace, "ENTRY_LIMIT", 20 + 21 * 3)
    assert sorted(snapshot(tmp_path)) == ["d00/file", "d01/file", "d02/file"]


def test_copying_a_directory_of_many_files_out_never_lists_it_whole(tmp_path: Path) -> None:
    """Out of the local sandbox, a directory is copied within the trial's budget; the files past
    it are counted as refused, one at a time, never as a list of all their names."""
    _flood(tmp_path)
    answer = _measured(tmp_path, "copy")
    assert (answer["copied"], answer["refused"]) == (1, FILES)
    # Listing the directory whole peaked at 4.8 MB here (a name per file); walking it an entry at a
    # time peaks at 1.9 MB, most of it pathlib's interning of the names it has seen.
    assert isinstance(answer["peak"], int) and answer["peak"] < 3 * 1024 * 1024, answer


def test_copying_millions_of_directories_out_holds_one_listing_per_level(tmp_path: Path) -> None:
    """Directories side by side are entered one at a time: the walk holds the listings it is inside
    (two here), never the directories still to enter."""
    _directories(tmp_path)
    answer = _measured(tmp_path, "copy")
    assert (answer["copied"], answer["refused"], answer["unwalked"]) == (1, FILES, 0)
    # A list of the directories still to enter peaked at 10 MB here; the walk peaks at 1.9 MB.
    assert isinstance(answer["peak"], int) and answer["peak"] < 3 * 1024 * 1024, answer


def test_a_nest_deeper_than_the_bound_is_counted_not_entered(tmp_path: Path) -> None:
    """Ten thousand levels would hold ten thousand open directories: below MAX_AGENT_TREE_DEPTH
    nothing is entered, the trial says so, and what lies above is kept."""
    source = tmp_path / "source"
    source.mkdir()
    (source / "top.txt").write_text("top\n")
    # Made a level at a time from inside (a path this long could not be named whole).
    descriptor = os.open(source, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(MAX_AGENT_TREE_DEPTH + 20):
            os.mkdir("d", dir_fd=descriptor)
            deeper = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=descriptor)
            os.close(descriptor)
            descriptor = deeper
            if level == MAX_AGENT_TREE_DEPTH + 10:
                os.close(os.open("deep.txt", os.O_CREAT | os.O_WRONLY, dir_fd=descriptor))
    finally:
        os.close(descriptor)
    budget = KeepBudget(files=10, bytes=1 << 20)
    kept = copy_tree_masked(source, tmp_path / "target", (), budget)
    assert kept.copied == 1 and (tmp_path / "target" / "top.txt").read_text() == "top\n"
    assert budget.unwalked_directories == 1
    assert f"more than {MAX_AGENT_TREE_DEPTH} levels deep were not kept" in (budget.note() or "")
    # Moving the tree whole would keep what the copy could not count: it is copied instead.
    assert plain_tree(source) is False
