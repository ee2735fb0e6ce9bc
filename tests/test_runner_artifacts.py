"""Keeping a trial's logs: moved when that is safe, copied with secrets masked otherwise, and never
a way for a command to make the host copy out (or keep writing to) something it should not."""

import os
import time
from pathlib import Path

import pytest

from envloop.environments.keeping import keep_tree, move_plain_tree, plain_tree
from envloop.environments.local.instance import empty_directory, instances_under
from envloop.environments.procs import marked_pids
from tests.test_runner_shell import LOGS, MODES, run, spec_for, write_task

SECRET = "sk-artifact-secret-4711"


@pytest.fixture
def host_secret(tmp_path: Path) -> Path:
    """A host directory holding a file no trial may have copied out."""
    directory = tmp_path / "host-only"
    directory.mkdir()
    (directory / "id_rsa").write_text("PRIVATE KEY\n")
    return directory


def kept_files(tmp_path: Path) -> dict[str, str]:
    root = tmp_path / "artifacts"
    return {
        str(path.relative_to(root)): path.read_text(errors="replace")
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink()
    }


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("secrets", [False, True])
def test_logs_are_kept_whole_and_secrets_masked(tmp_path: Path, mode: str, secrets: bool) -> None:
    task = write_task(tmp_path / "logs", f"echo checked {SECRET}; echo 1 > {LOGS}/verifier/reward.txt\n")
    command = f"echo agent says {SECRET}; mkdir -p {LOGS}/agent/deep; echo note > {LOGS}/agent/deep/n.txt"
    params = {"AGENT_NAME": "command", "AGENT_COMMAND": command}
    if secrets:
        params["MODEL_API_KEY"] = SECRET
    spec = spec_for(tmp_path, task, params)
    if secrets:
        spec = spec.model_copy(update={"secret_values": (SECRET,)})
    outcome = run(mode, spec)
    assert (outcome.status, outcome.reward) == ("completed", 1.0)
    shown = "***" if secrets else SECRET
    files = kept_files(tmp_path)
    assert files["agent/stdout.txt"] == f"agent says {shown}\n"
    assert files["agent/deep/n.txt"] == "note\n"
    assert files["verifier/stdout.txt"] == f"checked {shown}\n"
    assert files["verifier/reward.txt"] == "1\n"
    assert instances_under(tmp_path / "instances") == []
    assert [path.name for path in (tmp_path / "artifacts").iterdir() if path.name.startswith(".")] == []


@pytest.mark.parametrize("secrets", [False, True])
def test_a_log_named_like_the_captured_output_is_kept_beside_it(tmp_path: Path, secrets: bool) -> None:
    task = write_task(
        tmp_path / "clash",
        f"echo checked; echo own > {LOGS}/verifier/stdout.txt; echo 1 > {LOGS}/verifier/reward.txt\n",
    )
    command = f"echo captured; echo written > {LOGS}/agent/stdout.txt"
    spec = spec_for(tmp_path, task, {"AGENT_NAME": "command", "AGENT_COMMAND": command})
    if secrets:
        spec = spec.model_copy(update={"secret_values": (SECRET,)})
    outcome = run("plain", spec)
    assert (outcome.status, outcome.reward) == ("completed", 1.0)
    files = kept_files(tmp_path)
    assert (files["agent/stdout.txt"], files["agent/stdout.txt.2"]) == ("captured\n", "written\n")
    assert (files["verifier/stdout.txt"], files["verifier/stdout.txt.2"]) == ("checked\n", "own\n")


@pytest.mark.parametrize("mode", MODES)
def test_a_link_planted_in_the_logs_is_not_followed(tmp_path: Path, mode: str, host_secret: Path) -> None:
    task = write_task(tmp_path / "linked", "true\n")
    command = f"ln -s {host_secret}/id_rsa {LOGS}/agent/key; ln -s {host_secret} {LOGS}/agent/dir"
    run(mode, spec_for(tmp_path, task, {"AGENT_NAME": "command", "AGENT_COMMAND": command}))
    assert "PRIVATE KEY\n" not in kept_files(tmp_path).values()
    assert not any(path.is_symlink() for path in (tmp_path / "artifacts").rglob("*"))


def test_a_log_directory_replaced_by_a_link_is_not_followed(tmp_path: Path, host_secret: Path) -> None:
    task = write_task(tmp_path / "swapped", "true\n")
    command = f"rm -rf {LOGS}/agent && ln -s {host_secret} {LOGS}/agent"
    run("plain", spec_for(tmp_path, task, {"AGENT_NAME": "command", "AGENT_COMMAND": command}))
    assert "PRIVATE KEY\n" not in kept_files(tmp_path).values()
    assert not (tmp_path / "artifacts" / "agent").is_symlink()
    assert (host_secret / "id_rsa").read_text() == "PRIVATE KEY\n"


@pytest.mark.parametrize("mode", MODES)
def test_a_daemon_is_stopped_before_its_logs_are_kept(tmp_path: Path, mode: str) -> None:
    task = write_task(tmp_path / "daemon", "true\n")
    ticks = f"{LOGS}/agent/ticks.txt"
    command = (
        f"setsid bash -c 'while :; do echo tick >> {ticks}; sleep 0.01; done' & "
        f"until [ -s {ticks} ]; do sleep 0.01; done"
    )
    spec = spec_for(tmp_path, task, {"AGENT_NAME": "command", "AGENT_COMMAND": command})
    run(mode, spec)
    assert marked_pids(spec.run_id) == []
    ticks = tmp_path / "artifacts" / "agent" / "ticks.txt"
    size = ticks.stat().st_size
    time.sleep(0.1)
    assert ticks.stat().st_size == size


def test_plain_tree_tells_plain_files_from_links_and_large_trees(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    for n in range(5):
        (tree / "a" / f"{n}.txt").write_text(str(n))
    assert plain_tree(tree) is True
    assert plain_tree(tree, max_entries=3) is None
    assert plain_tree(tmp_path / "missing") is False
    (tree / "a" / "b" / "fifo").unlink(missing_ok=True)
    os.mkfifo(tree / "a" / "b" / "fifo")
    assert plain_tree(tree) is False
    (tree / "a" / "b" / "fifo").unlink()
    (tree / "a" / "link").symlink_to("/etc/passwd")
    assert plain_tree(tree) is False
    link = tmp_path / "link-to-tree"
    link.symlink_to(tree)
    assert plain_tree(link) is False


def test_trees_are_moved_without_secrets_and_copied_masked_with_them(tmp_path: Path) -> None:
    for name in ("moved", "copied"):
        (tmp_path / name / "sub").mkdir(parents=True)
        (tmp_path / name / "sub" / "log.txt").write_text(f"key={SECRET}\n")
    assert move_plain_tree(tmp_path / "moved", tmp_path / "kept-moved", [SECRET]) is False
    assert move_plain_tree(tmp_path / "moved", tmp_path / "kept-moved", []) is True
    assert not (tmp_path / "moved").exists()
    assert (tmp_path / "kept-moved" / "sub" / "log.txt").read_text() == f"key={SECRET}\n"
    keep_tree(tmp_path / "copied", tmp_path / "kept-copied", [SECRET])
    assert (tmp_path / "kept-copied" / "sub" / "log.txt").read_text() == "key=***\n"


def test_empty_directory_reuses_only_a_clean_writable_directory(tmp_path: Path) -> None:
    logs = tmp_path / "verifier"
    logs.mkdir()
    inode = logs.stat().st_ino
    empty_directory(logs)
    assert logs.stat().st_ino == inode
    (logs / "reward.txt").write_text("1\n")
    empty_directory(logs)
    assert list(logs.iterdir()) == []
    logs.chmod(0o500)
    empty_directory(logs)
    assert logs.stat().st_mode & 0o700 == 0o700
    logs.rmdir()
    logs.symlink_to(tmp_path)
    empty_directory(logs)
    assert logs.is_dir() and not logs.is_symlink() and list(logs.iterdir()) == []
