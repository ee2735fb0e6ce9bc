"""The directories below `/run/envloop`, one per store a root worker served: made with each instance
(never listable), and removed once no instance is left in them, even while workers of live stores
keep making instances there."""

import os
import stat
import threading
from pathlib import Path

import pytest

from envloop.environments.base import EnvironmentSetupError
from envloop.environments.local import instance


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    run = tmp_path / "run"
    monkeypatch.setattr(instance, "RUNTIME_DIR", run)
    return run


def test_the_sweep_removes_the_parents_no_instance_is_left_in(runtime: Path, tmp_path: Path) -> None:
    deleted_store = instance.instance_parent(tmp_path / "deleted" / "instances", for_other_uid=True)
    live_store = instance.instance_parent(tmp_path / "live" / "instances", for_other_uid=True)
    instance.make_root(deleted_store / "trl_a.r1", private_parent=True)
    (deleted_store / "trl_a.r1").rmdir()  # its trial ended; the store was deleted since
    instance.make_root(live_store / "trl_b.r1", private_parent=True)
    (runtime / "not-a-parent").write_text("")

    removed = instance.sweep_empty_parents()

    assert removed == [f"empty instance directory {deleted_store.name}"]
    assert not deleted_store.exists()
    assert (live_store / "trl_b.r1").is_dir()
    assert (runtime / "not-a-parent").is_file()


def test_without_a_runtime_directory_the_sweep_removes_nothing(runtime: Path) -> None:
    assert instance.sweep_empty_parents() == []
    assert not runtime.exists()


def test_an_instance_is_made_while_sweeps_keep_removing_its_parent(runtime: Path, tmp_path: Path) -> None:
    """A worker of a live store makes its instances while other workers sweep: each sweep that finds
    the parent empty removes it, and every instance is still made, below a parent no one can list."""
    parent = instance.instance_parent(tmp_path / "store" / "instances", for_other_uid=True)
    stop = threading.Event()
    swept = 0

    def sweep() -> None:
        nonlocal swept
        while not stop.is_set():
            swept += len(instance.sweep_empty_parents())

    sweeper = threading.Thread(target=sweep)
    sweeper.start()
    try:
        for number in range(300):
            root = parent / f"trl_{number}.r1"
            instance.make_root(root, private_parent=True)
            assert root.is_dir()
            assert stat.S_IMODE(parent.stat().st_mode) == 0o711
            root.rmdir()
    finally:
        stop.set()
        sweeper.join()
    assert swept > 0  # the sweeps did remove the parent between instances


def test_a_parent_that_is_not_the_workers_own_directory_is_refused(runtime: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    parent = instance.instance_parent(tmp_path / "store" / "instances", for_other_uid=True)
    runtime.mkdir(mode=0o711)
    parent.symlink_to(elsewhere)

    with pytest.raises(EnvironmentSetupError, match="is not a directory owned by the worker"):
        instance.make_root(parent / "trl_a.r1", private_parent=True)
    assert list(elsewhere.iterdir()) == []
    assert instance.sweep_empty_parents() == []  # a link is no parent to remove
    assert parent.is_symlink()


def test_a_parent_of_the_workers_own_is_made_with_its_parents(tmp_path: Path) -> None:
    root = tmp_path / "home" / "instances" / "trl_a.r1"
    instance.make_root(root, private_parent=False)
    assert root.is_dir()
    assert instance.instance_parent(tmp_path / "home", for_other_uid=False) == tmp_path / "home"


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root worker's instances live below /run/envloop")
def test_the_real_runtime_directory_is_private() -> None:
    """What the sweeps and instances above do to the machine's own `/run/envloop`, checked on it."""
    instance.make_root(instance.RUNTIME_DIR / "0000000000000000" / "trl_probe.r1", private_parent=True)
    try:
        assert stat.S_IMODE(instance.RUNTIME_DIR.stat().st_mode) == 0o711
        assert stat.S_IMODE((instance.RUNTIME_DIR / "0000000000000000").stat().st_mode) == 0o711
    finally:
        (instance.RUNTIME_DIR / "0000000000000000" / "trl_probe.r1").rmdir()
        instance.sweep_empty_parents()
