"""Task digests: identical content gives the identical digest; any content change gives a new one."""

import os
import shutil
import socket
from pathlib import Path

import pytest

from envloop.tasks.digest import task_digest, task_entries
from envloop.tasks.model import TaskFormatError

FIXTURE = Path(__file__).parent / "fixtures" / "tasks" / "harbor-hello-world"


@pytest.fixture
def task(tmp_path: Path) -> Path:
    root = tmp_path / "task"
    shutil.copytree(FIXTURE, root)
    return root


def test_digest_has_sha256_prefix_and_hex(task: Path) -> None:
    digest = task_digest(task)

    assert digest.startswith("sha256:")
    assert len(digest) == len("sha256:") + 64
    int(digest.removeprefix("sha256:"), 16)


def test_digest_is_stable_across_copies_and_timestamps(task: Path, tmp_path: Path) -> None:
    before = task_digest(task)
    copy = tmp_path / "elsewhere" / "renamed-root"
    shutil.copytree(task, copy)
    for path in copy.rglob("*"):
        os.utime(path, (1_000_000, 1_000_000))

    assert task_digest(copy) == before
    assert task_digest(task) == before


def test_digest_ignores_permission_bits(task: Path) -> None:
    before = task_digest(task)
    (task / "tests" / "test.sh").chmod(0o600)

    assert task_digest(task) == before


def test_one_changed_byte_changes_the_digest(task: Path) -> None:
    before = task_digest(task)
    path = task / "environment" / "greeting.txt"
    data = bytearray(path.read_bytes())
    data[0] ^= 1
    path.write_bytes(bytes(data))

    assert task_digest(task) != before


def test_renaming_a_file_changes_the_digest(task: Path) -> None:
    before = task_digest(task)
    (task / "environment" / "greeting.txt").rename(task / "environment" / "greeting2.txt")

    assert task_digest(task) != before


def test_moving_a_file_to_another_directory_changes_the_digest(task: Path) -> None:
    before = task_digest(task)
    (task / "environment" / "greeting.txt").rename(task / "greeting.txt")

    assert task_digest(task) != before


def test_adding_an_empty_file_changes_the_digest(task: Path) -> None:
    before = task_digest(task)
    (task / "tests" / "empty.txt").write_bytes(b"")

    assert task_digest(task) != before


def test_version_control_caches_and_empty_directories_are_ignored(task: Path) -> None:
    before = task_digest(task)
    (task / ".git" / "objects").mkdir(parents=True)
    (task / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (task / "tests" / "__pycache__").mkdir()
    (task / "tests" / "__pycache__" / "test_x.cpython-311.pyc").write_bytes(b"\0\1")
    (task / ".DS_Store").write_bytes(b"finder")
    (task / "environment" / "empty-dir").mkdir()

    assert task_digest(task) == before
    assert [entry.path for entry in task_entries(task)] == [
        "environment/Dockerfile",
        "environment/greeting.txt",
        "instruction.md",
        "solution/solve.sh",
        "task.toml",
        "tests/test.sh",
    ]


def test_symlink_inside_the_task_is_hashed_by_its_target_text(task: Path) -> None:
    before = task_digest(task)
    (task / "tests" / "greeting.txt").symlink_to("../environment/greeting.txt")
    with_link = task_digest(task)
    entry = next(e for e in task_entries(task) if e.path == "tests/greeting.txt")

    assert with_link != before
    assert entry.kind == "link"
    assert entry.link_target == "../environment/greeting.txt"

    (task / "tests" / "greeting.txt").unlink()
    shutil.copy(task / "environment" / "greeting.txt", task / "tests" / "greeting.txt")
    assert task_digest(task) not in (before, with_link)


def test_symlink_to_a_directory_inside_the_task_is_not_followed(task: Path) -> None:
    (task / "env-link").symlink_to("environment")

    paths = [entry.path for entry in task_entries(task)]

    assert "env-link" in paths
    assert "env-link/Dockerfile" not in paths


def test_symlink_to_an_absolute_path_is_refused(task: Path) -> None:
    (task / "tests" / "passwd").symlink_to("/etc/passwd")

    with pytest.raises(TaskFormatError, match="absolute path"):
        task_digest(task)


def test_symlink_pointing_outside_is_refused(task: Path) -> None:
    (task / "tests" / "up").symlink_to("../../outside.txt")

    with pytest.raises(TaskFormatError, match="points outside the task"):
        task_digest(task)


def test_chain_of_symlinks_that_escapes_together_is_refused(task: Path) -> None:
    (task / "tests" / "to-root").symlink_to("..")
    (task / "sneaky").symlink_to("tests/to-root/..")

    with pytest.raises(TaskFormatError, match="sneaky"):
        task_digest(task)


def test_symlink_loop_is_refused(task: Path) -> None:
    (task / "a").symlink_to("b")
    (task / "b").symlink_to("a")

    with pytest.raises(TaskFormatError, match="symlink loop"):
        task_digest(task)


def test_fifo_is_refused(task: Path) -> None:
    os.mkfifo(task / "tests" / "pipe")

    with pytest.raises(TaskFormatError, match="FIFO"):
        task_digest(task)


def test_socket_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    (root / "task.toml").write_text("")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(root / "sock"))
        with pytest.raises(TaskFormatError, match="socket"):
            task_digest(root)


def test_digest_of_a_file_instead_of_a_directory_is_refused(task: Path) -> None:
    with pytest.raises(TaskFormatError, match="not a directory"):
        task_digest(task / "task.toml")
