"""Task archives: packing is reproducible, and hostile archives are refused with nothing written."""

import io
import os
import shutil
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from envloop.store.artifacts import SMALL_ARCHIVE_BYTES, SMALL_TASK_BYTES, SMALL_TASK_ENTRIES, ArtifactStore
from envloop.tasks.archive import extract_shared, extract_task_archive, pack_task, safe_extract
from envloop.tasks.digest import task_digest
from envloop.tasks.model import TaskFormatError

FIXTURE = Path(__file__).parent / "fixtures" / "tasks" / "harbor-hello-world"


def _tar(path: Path, *members: tuple[tarfile.TarInfo, bytes | None], compress: bool = True) -> Path:
    with tarfile.open(path, "w:gz" if compress else "w") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _special(name: str, kind: bytes, link: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info, None


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """An upload folder for archives and a separate extraction folder, so leftovers are visible."""
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    target_parent = tmp_path / "store" / "tasks"
    target_parent.mkdir(parents=True)
    return uploads, target_parent


def _refused(archive: Path, target_parent: Path, match: str, **limits: int) -> None:
    dest = target_parent / "task"
    with pytest.raises(TaskFormatError, match=match) as caught:
        safe_extract(archive, dest, **limits)
    assert "\n" not in str(caught.value)
    assert list(target_parent.iterdir()) == []
    assert not (target_parent.parent / "x").exists()
    assert not (target_parent.parent.parent / "x").exists()


def test_packing_the_same_content_twice_gives_identical_bytes(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(FIXTURE, copy)
    for path in copy.rglob("*"):
        os.utime(path, (1_700_000_000, 1_700_000_000))

    pack_task(FIXTURE, tmp_path / "a.tar.gz")
    pack_task(copy, tmp_path / "b.tar.gz")

    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()


def test_packed_archive_has_sorted_entries_with_fixed_owners_and_times(tmp_path: Path) -> None:
    pack_task(FIXTURE, tmp_path / "t.tgz")

    with tarfile.open(tmp_path / "t.tgz") as tar:
        members = tar.getmembers()

    names = [m.name for m in members]
    assert names == sorted(names)
    assert "tests/test.sh" in names
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, 0, "", "")}
    modes = {m.name: m.mode for m in members}
    assert modes["tests/test.sh"] == 0o755
    assert modes["instruction.md"] == 0o644


def test_pack_then_extract_round_trips_the_digest(tmp_path: Path) -> None:
    task = tmp_path / "task"
    shutil.copytree(FIXTURE, task)
    (task / "tests" / "greeting.txt").symlink_to("../environment/greeting.txt")
    pack_task(task, tmp_path / "t.tar.gz")

    safe_extract(tmp_path / "t.tar.gz", tmp_path / "out")

    assert task_digest(tmp_path / "out") == task_digest(task)
    assert os.access(tmp_path / "out" / "solution" / "solve.sh", os.X_OK)
    assert (tmp_path / "out" / "tests" / "greeting.txt").read_text() == (
        FIXTURE / "environment" / "greeting.txt"
    ).read_text()


def test_a_task_unpacked_for_a_shared_cache_leaves_nothing_beside_it(tmp_path: Path) -> None:
    pack_task(FIXTURE, tmp_path / "t.tar.gz")
    cache = tmp_path / "cache"
    cache.mkdir()

    unpacked = extract_shared(tmp_path / "t.tar.gz", cache / "digest")

    assert unpacked == cache / "digest"
    assert task_digest(unpacked) == task_digest(FIXTURE)
    assert list(cache.iterdir()) == [unpacked]


def test_a_shared_unpack_its_check_refuses_leaves_nothing(tmp_path: Path) -> None:
    pack_task(FIXTURE, tmp_path / "t.tar.gz")
    cache = tmp_path / "cache"
    cache.mkdir()

    def refuse(task: Path) -> None:
        assert (task / "task.toml").is_file()  # the check sees the task itself
        raise ValueError("not the content of its digest")

    with pytest.raises(ValueError, match="not the content"):
        extract_shared(tmp_path / "t.tar.gz", cache / "digest", refuse)
    assert list(cache.iterdir()) == []


def test_a_shared_unpack_that_loses_the_race_uses_the_copy_that_won(tmp_path: Path) -> None:
    pack_task(FIXTURE, tmp_path / "t.tar.gz")
    cache = tmp_path / "cache"
    (cache / "digest").mkdir(parents=True)
    (cache / "digest" / "won.txt").write_text("the other process's copy\n")

    unpacked = extract_shared(tmp_path / "t.tar.gz", cache / "digest")

    assert (unpacked / "won.txt").read_text() == "the other process's copy\n"
    assert list(cache.iterdir()) == [unpacked]


def test_extract_task_archive_loads_a_task_wrapped_in_one_folder(tmp_path: Path) -> None:
    archive = tmp_path / "hello.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(FIXTURE.rglob("*")):
            if path.is_file():
                zf.write(path, f"hello-world/{path.relative_to(FIXTURE).as_posix()}")

    task = extract_task_archive(archive, tmp_path / "out")

    assert task.name == "hello-world"
    assert task.digest == task_digest(FIXTURE)


def test_extract_task_archive_removes_everything_when_the_task_is_malformed(tmp_path: Path) -> None:
    archive = _tar(tmp_path / "t.tar.gz", _file("task.toml", b"[agent]\ntimeout_sec = -1\n"))

    with pytest.raises(TaskFormatError, match=r"agent\.timeout_sec"):
        extract_task_archive(archive, tmp_path / "out" / "task")

    assert list((tmp_path / "out").iterdir()) == []


def test_plain_tar_and_root_entry_are_accepted(tmp_path: Path) -> None:
    root = tarfile.TarInfo("./")
    root.type = tarfile.DIRTYPE
    archive = _tar(tmp_path / "t.tar", (root, None), _file("./a/b.txt", b"hi"), compress=False)

    safe_extract(archive, tmp_path / "out")

    assert (tmp_path / "out" / "a" / "b.txt").read_bytes() == b"hi"


def test_extracting_onto_an_existing_destination_is_refused(tmp_path: Path) -> None:
    archive = _tar(tmp_path / "t.tar.gz", _file("a.txt"))
    (tmp_path / "out").mkdir()

    with pytest.raises(FileExistsError):
        safe_extract(archive, tmp_path / "out")


def test_absolute_path_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = _tar(uploads / "t.tar.gz", _file("ok.txt"), _file("/tmp/x"))

    _refused(archive, target, "absolute path")


def test_dot_dot_component_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = _tar(uploads / "t.tar.gz", _file("ok.txt"), _file("../x"))

    _refused(archive, target, r"'\.\.' in a path")


def test_dot_dot_inside_a_path_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = _tar(uploads / "t.tar.gz", _file("a/../../x"))

    _refused(archive, target, r"'\.\.' in a path")


def test_symlink_to_etc_passwd_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = _tar(uploads / "t.tar.gz", _file("ok.txt"), _special("passwd", tarfile.SYMTYPE, "/etc/passwd"))

    _refused(archive, target, "symlink to an absolute path")


def test_relative_symlink_escaping_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = _tar(uploads / "t.tar.gz", _special("a/up", tarfile.SYMTYPE, "../../x"))

    _refused(archive, target, "points outside the archive")


def test_chain_of_symlinks_that_escapes_together_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = _tar(
        uploads / "t.tar.gz",
        _special("d/to-root", tarfile.SYMTYPE, ".."),
        _special("sneaky", tarfile.SYMTYPE, "d/to-root/.."),
    )

    _refused(archive, target, "'sneaky'.*points outside")


def test_writing_through_a_symlink_entry_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = _tar(
        uploads / "t.tar.gz",
        _special("link", tarfile.SYMTYPE, "."),
        _file("link/x", b"through the link"),
    )

    _refused(archive, target, "not a directory")


def test_hardlink_outside_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = _tar(uploads / "t.tar.gz", _special("shadow", tarfile.LNKTYPE, "/etc/shadow"))

    _refused(archive, target, "entry 'shadow': hardlink to '/etc/shadow': absolute path is not allowed")


def test_hardlink_with_dot_dot_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = _tar(uploads / "t.tar.gz", _special("h", tarfile.LNKTYPE, "../x"))

    _refused(archive, target, r"entry 'h': hardlink to '\.\./x': '\.\.' in a path")


def test_hardlink_to_a_name_not_in_the_archive_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = _tar(uploads / "t.tar.gz", _special("h", tarfile.LNKTYPE, "etc/passwd"))

    _refused(archive, target, "not a file above it")


def test_hardlink_to_a_member_is_extracted_as_a_copy(tmp_path: Path) -> None:
    archive = _tar(
        tmp_path / "t.tar.gz", _file("a.txt", b"shared"), _special("b.txt", tarfile.LNKTYPE, "a.txt")
    )

    safe_extract(archive, tmp_path / "out")

    assert (tmp_path / "out" / "b.txt").read_bytes() == b"shared"
    assert (tmp_path / "out" / "b.txt").stat().st_ino != (tmp_path / "out" / "a.txt").stat().st_ino


def test_fifo_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = _tar(uploads / "t.tar.gz", _file("ok.txt"), _special("pipe", tarfile.FIFOTYPE))

    _refused(archive, target, "FIFO")


def test_device_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = _tar(uploads / "t.tar.gz", _special("sda", tarfile.BLKTYPE))

    _refused(archive, target, "device")


def test_duplicate_entry_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = _tar(uploads / "t.tar.gz", _file("a.txt", b"1"), _file("./a.txt", b"2"))

    _refused(archive, target, "more than once")


def test_archive_over_the_size_cap_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = _tar(uploads / "t.tar.gz", _file("a.bin", b"\0" * 600), _file("b.bin", b"\0" * 600))

    _refused(archive, target, "larger than 1000 bytes", max_bytes=1000)


def test_archive_over_the_entry_cap_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = _tar(uploads / "t.tar.gz", *(_file(f"f{i}.txt") for i in range(11)))

    _refused(archive, target, "more than 10 entries", max_entries=10)


def test_zip_slip_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = uploads / "t.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("ok.txt", "fine")
        zf.writestr("../../x", "escaped")

    _refused(archive, target, r"'\.\.' in a path")


def test_zip_absolute_path_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = uploads / "t.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(zipfile.ZipInfo("/tmp/x"), "escaped")

    _refused(archive, target, "absolute path")


def test_zip_symlink_outside_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = uploads / "t.zip"
    link = zipfile.ZipInfo("passwd")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(link, "/etc/passwd")

    _refused(archive, target, "symlink to an absolute path")


def test_zip_fifo_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = uploads / "t.zip"
    fifo = zipfile.ZipInfo("pipe")
    fifo.external_attr = (stat.S_IFIFO | 0o644) << 16
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(fifo, "")

    _refused(archive, target, "FIFO")


def test_zip_keeps_executable_bits_and_inside_symlinks(tmp_path: Path) -> None:
    archive = tmp_path / "t.zip"
    script = zipfile.ZipInfo("tests/test.sh")
    script.external_attr = (stat.S_IFREG | 0o755) << 16
    link = zipfile.ZipInfo("tests/alias.sh")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(script, "echo 1\n")
        zf.writestr(link, "test.sh")

    safe_extract(archive, tmp_path / "out")

    assert os.access(tmp_path / "out" / "tests" / "test.sh", os.X_OK)
    assert (tmp_path / "out" / "tests" / "alias.sh").readlink() == Path("test.sh")


def test_corrupt_archive_is_refused(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = uploads / "t.tar.gz"
    archive.write_bytes(b"\x1f\x8b\x08\x00garbage that is not a tarball")

    _refused(archive, target, "not a readable archive")


def test_truncated_archive_is_refused_and_leaves_nothing(places: tuple[Path, Path]) -> None:
    uploads, target = places
    archive = _tar(uploads / "t.tar.gz", _file("a.bin", os.urandom(50_000)))
    archive.write_bytes(archive.read_bytes()[:-2000])

    _refused(archive, target, "not a readable archive")


def _stored(tmp_path: Path, task: Path) -> tuple[ArtifactStore, str]:
    store = ArtifactStore(tmp_path / "store")
    digest = task_digest(task)
    store.put_task(digest, task)
    return store, digest


def test_a_small_task_in_a_local_store_is_unpacked_where_it_is_asked_for(tmp_path: Path) -> None:
    store, digest = _stored(tmp_path, FIXTURE)

    unpacked = store.small_task_dir(digest)

    assert unpacked is not None and task_digest(unpacked) == digest
    assert store.small_task_dir(digest) == unpacked == store.task_dir(digest)  # unpacked once


@pytest.mark.parametrize("size", ["many entries", "large content"])
def test_a_task_too_large_to_unpack_at_once_is_left_to_the_thread_and_nothing_is_written(
    tmp_path: Path, size: str
) -> None:
    task = tmp_path / "task"
    shutil.copytree(FIXTURE, task)
    data = task / "environment" / "data"
    data.mkdir()
    if size == "many entries":
        for number in range(SMALL_TASK_ENTRIES):
            (data / f"{number}.txt").write_text("x")
    else:  # compresses to a few kilobytes, so only the unpacked size is over the limit
        (data / "zeros.bin").write_bytes(bytes(SMALL_TASK_BYTES + 1))
    store, digest = _stored(tmp_path, task)
    assert store.task_archive(digest).stat().st_size <= SMALL_ARCHIVE_BYTES

    assert store.small_task_dir(digest) is None
    assert list((store.root / "task-cache").iterdir()) == []  # no staging directory left

    assert task_digest(store.task_dir(digest)) == digest  # the full limits take it


def test_a_hostile_small_archive_is_refused_where_it_is_asked_for(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "store")
    digest = "sha256:" + "ab" * 32
    archive = store.task_archive(digest)
    archive.parent.mkdir(parents=True, exist_ok=True)
    _tar(archive, _file("../escape.txt"))

    with pytest.raises(TaskFormatError):
        store.small_task_dir(digest)
    assert not (tmp_path / "store" / "escape.txt").exists()
    assert list((store.root / "task-cache").iterdir()) == []
