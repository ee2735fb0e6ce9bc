"""Discovering tasks: one task directory, or a folder of them, never a silently shrunk dataset."""

import shutil
from pathlib import Path

import pytest

from envloop.tasks.discover import discover_tasks, load_tasks
from envloop.tasks.model import TaskFormatError

FIXTURE = Path(__file__).parent / "fixtures" / "tasks" / "harbor-hello-world"


def _folder(tmp_path: Path, *names: str) -> Path:
    folder = tmp_path / "dataset"
    folder.mkdir()
    for name in names:
        shutil.copytree(FIXTURE, folder / name)
    return folder


def test_single_task_directory_is_itself() -> None:
    assert discover_tasks(FIXTURE) == [FIXTURE]


def test_folder_of_tasks_is_listed_sorted_by_name(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "zeta", "alpha", "mid")
    (folder / "README.md").write_text("three tasks\n")
    (folder / ".git").mkdir()

    assert [p.name for p in discover_tasks(folder)] == ["alpha", "mid", "zeta"]


def test_empty_folder_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path)

    with pytest.raises(TaskFormatError, match="no task directories found"):
        discover_tasks(folder)


def test_missing_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TaskFormatError, match="no such directory"):
        discover_tasks(tmp_path / "absent")


def test_subfolder_without_task_toml_is_refused_rather_than_skipped(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "alpha", "beta")
    (folder / "beta" / "task.toml").rename(folder / "beta" / "task.tml")

    with pytest.raises(TaskFormatError) as caught:
        discover_tasks(folder)

    assert str(caught.value) == f"{folder / 'beta'}: not a task directory (no task.toml)"


def test_load_tasks_loads_every_task_in_order(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "b-task", "a-task")

    tasks = load_tasks(folder)

    assert [t.name for t in tasks] == ["a-task", "b-task"]
    assert tasks[0].digest == tasks[1].digest


def test_load_tasks_refuses_names_that_differ_only_in_case(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "Hello", "hello")

    with pytest.raises(TaskFormatError, match="duplicate task name 'hello'"):
        load_tasks(folder)


def test_load_tasks_reports_the_first_malformed_task(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "good", "bad")
    (folder / "bad" / "instruction.md").unlink()

    with pytest.raises(TaskFormatError, match=r"instruction\.md: missing"):
        load_tasks(folder)
