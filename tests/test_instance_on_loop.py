"""Which instances are made and removed on the event loop (environments/local/on_loop.py): a task
that copies little in, a file system that holds little; anything larger, or anything but plain
files and directories, still goes to a thread so the loop keeps serving the other trials."""

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from envloop.environments import LocalEnvironmentProvider
from envloop.environments.local import quota
from envloop.environments.local.environment import LocalEnvironment
from envloop.environments.local.on_loop import (
    INLINE_COPY_BYTES,
    INLINE_COPY_ENTRIES,
    INLINE_FREE_BYTES,
    copies_little,
    frees_little,
)
from tests.test_environment_local import MODES, make_spec, make_task

needs_root = pytest.mark.skipif(not quota.can_mount(), reason="instance file systems need root")


def _tree(root: Path, files: int, size: int = 1) -> Path:
    root.mkdir(parents=True)
    for number in range(files):
        (root / f"{number}.txt").write_bytes(b"x" * size)
    return root


def test_a_small_plain_tree_copies_little(tmp_path: Path) -> None:
    context = _tree(tmp_path / "context", 3)
    tests = _tree(tmp_path / "tests", 2)
    (tests / "sub").mkdir()
    assert copies_little([context, tests, tmp_path / "absent"])


def test_too_many_entries_in_all_roots_do_not(tmp_path: Path) -> None:
    half = INLINE_COPY_ENTRIES // 2
    assert copies_little([_tree(tmp_path / "a", half), _tree(tmp_path / "b", half)])
    assert not copies_little([tmp_path / "a", tmp_path / "b", _tree(tmp_path / "c", 1)])


def test_too_many_bytes_do_not(tmp_path: Path) -> None:
    assert copies_little([_tree(tmp_path / "fits", 1, INLINE_COPY_BYTES)])
    assert not copies_little([_tree(tmp_path / "big", 2, INLINE_COPY_BYTES // 2 + 1)])


@pytest.mark.parametrize("kind", ["link to a file", "link to a directory", "fifo"])
def test_anything_but_plain_files_and_directories_goes_to_a_thread(tmp_path: Path, kind: str) -> None:
    """A link could name a huge file elsewhere that a copy follows: the thread meets it."""
    tests = _tree(tmp_path / "tests", 1)
    if kind == "link to a file":
        (tests / "link").symlink_to(tests / "0.txt")
    elif kind == "link to a directory":
        (tests / "link").symlink_to("/usr")
    else:
        os.mkfifo(tests / "fifo")
    assert not copies_little([tests])


def test_an_unreadable_tree_goes_to_a_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tests = _tree(tmp_path / "tests", 1)

    def refused(path: object) -> None:
        raise PermissionError(13, "refused")

    monkeypatch.setattr(os, "scandir", refused)
    assert not copies_little([tests])


def _made_where(tmp_path: Path, mode: str, files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether the instance of a task with these build-context files was made on the loop's thread."""
    task = make_task(tmp_path / "task", files=files)
    spec = make_spec(tmp_path, task)
    create, threads = LocalEnvironmentProvider._create, []

    def recorded(self: LocalEnvironmentProvider, *args: Any) -> Any:
        threads.append(threading.get_ident())
        return create(self, *args)

    monkeypatch.setattr(LocalEnvironmentProvider, "_create", recorded)

    async def main() -> int:
        async with LocalEnvironmentProvider(mode).instance(task, spec) as env:  # type: ignore[arg-type]
            assert isinstance(env, LocalEnvironment)
            assert (await env.exec(["true"])).exit_code == 0
            if mode == "bwrap":  # the verifier's fresh copy of the tests
                assert (env.paths.tests / "test.sh").read_text() == "echo verifier\n"
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    return threads == [loop_thread]


@pytest.mark.parametrize("mode", MODES)
def test_a_small_task_is_made_on_the_event_loop(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _made_where(tmp_path, mode, {"app.py": "print(1)\n"}, monkeypatch)


@pytest.mark.parametrize("mode", MODES)
def test_a_task_with_much_to_copy_is_made_on_a_thread(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    many = {f"data/{number}.txt": "x" for number in range(INLINE_COPY_ENTRIES + 1)}
    assert not _made_where(tmp_path, mode, many, monkeypatch)


@needs_root
def test_a_file_system_that_holds_little_frees_little(tmp_path: Path) -> None:
    root = tmp_path / "fs"
    root.mkdir()
    quota.mount_quota(root, 64)
    try:
        (root / "small").write_bytes(b"x" * 4096)
        assert frees_little(root)
        (root / "big").write_bytes(b"x" * (INLINE_FREE_BYTES + (1 << 20)))
        assert not frees_little(root)
    finally:
        assert quota.unmount_quota(root)
    assert not frees_little(tmp_path / "gone")


@needs_root
@pytest.mark.parametrize("written", [0, INLINE_FREE_BYTES + (1 << 20)])
def test_an_instance_is_removed_on_the_loop_only_when_it_holds_little(
    tmp_path: Path, written: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unmounting frees the file system's pages in the calling thread: much is freed on a thread."""
    task = make_task(tmp_path / "task")
    spec = make_spec(tmp_path, task)
    remove, threads = LocalEnvironment._remove_files, []

    def recorded(self: LocalEnvironment) -> None:
        threads.append(threading.get_ident())
        remove(self)

    monkeypatch.setattr(LocalEnvironment, "_remove_files", recorded)
    roots = []

    async def main() -> int:
        async with LocalEnvironmentProvider("plain").instance(task, spec) as env:
            assert isinstance(env, LocalEnvironment) and env.note.count("disk quota")
            (env.paths.app / "output").write_bytes(b"x" * written)
            roots.append(env.paths.root)
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert (threads == [loop_thread]) is (written == 0)
    assert not roots[0].exists()
