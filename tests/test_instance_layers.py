"""A trial's fresh copy of the task's layers (its tests, then a step's): what is copied, with which
modes, and what a later layer does to an earlier one's files; each file copied as `shutil.copy`
copies it."""

import os
import shutil
import stat
from pathlib import Path

import pytest

from envloop.environments.local.instance import copy_file, fresh_layers


def _tree(root: Path) -> list[tuple[str, str, str]]:
    found = []
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        kind = "link" if path.is_symlink() else "dir" if path.is_dir() else "file"
        content = str(path.readlink()) if kind == "link" else path.read_text() if kind == "file" else ""
        found.append((str(path.relative_to(root)), oct(stat.S_IMODE(info.st_mode)), content))
    return found


def test_layers_are_copied_fresh_with_their_modes_a_later_file_replacing_an_earlier(tmp_path: Path) -> None:
    task, step = tmp_path / "task", tmp_path / "step"
    (task / "lib").mkdir(parents=True)
    (task / "test.sh").write_text("task's")
    (task / "test.sh").chmod(0o755)
    (task / "lib" / "private.py").write_text("p")
    (task / "lib" / "private.py").chmod(0o600)
    (task / "lib").chmod(0o750)
    (task / "run.sh").symlink_to("test.sh")
    (step / "lib").mkdir(parents=True)
    (step / "test.sh").write_text("step's")
    (step / "test.sh").chmod(0o644)
    (step / "lib" / "extra.py").write_text("e")
    target = tmp_path / "tests"
    target.mkdir()
    (target / "left-by-the-last-trial").write_text("")

    fresh_layers([task, step], target)

    assert _tree(target) == [
        ("lib", "0o755", ""),
        ("lib/extra.py", "0o644", "e"),
        ("lib/private.py", "0o600", "p"),
        ("run.sh", "0o777", "test.sh"),
        ("test.sh", "0o644", "step's"),
    ]
    assert target.stat().st_mode & 0o777 == task.stat().st_mode & 0o777


def test_no_layer_gives_an_empty_directory(tmp_path: Path) -> None:
    fresh_layers([], tmp_path / "tests")

    assert list((tmp_path / "tests").iterdir()) == []


@pytest.mark.parametrize("already", ["nothing", "a file", "a link to a file", "a directory"])
def test_a_file_is_copied_as_shutil_copy_copies_it(tmp_path: Path, already: str) -> None:
    source = tmp_path / "source.sh"
    source.write_text("content")
    source.chmod(0o4751)
    results = []
    for copier in (shutil.copy, copy_file):
        place = tmp_path / copier.__name__
        place.mkdir()
        target = place / "target"
        if already == "a file":
            target.write_text("older and longer")
        elif already == "a link to a file":
            (place / "linked").write_text("older and longer")
            target.symlink_to("linked")
        elif already == "a directory":
            target.mkdir()
        copier(str(source), str(target))
        results.append(_tree(place))

    assert results[0] == results[1]


def test_a_named_pipe_is_refused_as_shutil_copy_refuses_it(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)

    with pytest.raises(shutil.SpecialFileError, match="is a named pipe"):
        copy_file(str(pipe), str(tmp_path / "copy"))
