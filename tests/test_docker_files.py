"""The docker environment's parts that need no daemon: FROM lines, hostile tar streams, refusals."""

import io
import tarfile
from pathlib import Path

import pytest
from pydantic import ValidationError

from envloop.environments.docker.container_spec import ContainerSpec
from envloop.environments.docker.images import BuildConfigError, build_network, read_build_settings
from envloop.environments.docker.transfer import Owner, pack_tree, read_single_file, unpack_tree
from envloop.tasks.dockerfile_images import read_images
from tests.conftest import EXAMPLES, El


def test_base_images_skips_stages_and_scratch_and_substitutes_args_declared_before_from() -> None:
    dockerfile = (
        "# syntax is ignored\n"
        "ARG PY=3.11\n"
        "FROM --platform=linux/amd64 python:${PY}-slim AS build\n"
        "RUN echo hi\n"
        "FROM build AS test\n"
        "FROM scratch\n"
        "FROM \\\n  debian:bookworm\n"
        "FROM $UNKNOWN\n"
        "COPY --from=build /a /a\n"
    )

    found = read_images(dockerfile)

    assert (found.images, found.unresolved) == (
        ["python:3.11-slim", "debian:bookworm"],
        ["FROM $UNKNOWN"],
    )


def test_build_network_accepts_only_default_host_or_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENVLOOP_DOCKER_BUILD_NETWORK", raising=False)
    assert build_network() is None
    monkeypatch.setenv("ENVLOOP_DOCKER_BUILD_NETWORK", "host")
    assert build_network() == "host"
    assert build_network("none") == "none"
    monkeypatch.setenv("ENVLOOP_DOCKER_BUILD_NETWORK", "bridge")
    with pytest.raises(BuildConfigError, match="ENVLOOP_DOCKER_BUILD_NETWORK='bridge'"):
        build_network()


def _tar(entries: list[tarfile.TarInfo], contents: dict[str, bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info in entries:
            data = contents.get(info.name)
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    buffer.seek(0)
    return buffer


def _entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.mode = 0o644
    return info


def test_unpacking_a_hostile_copy_out_keeps_only_files_inside_the_destination(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    archive = _tar(
        [
            _entry("logs", tarfile.DIRTYPE),
            _entry("logs/reward.txt"),
            _entry("logs/evil", tarfile.SYMTYPE, str(outside)),
            _entry("logs/evil/through-link.txt"),
            _entry("logs/../../escape.txt"),
            _entry("/etc/absolute.txt"),
            _entry("logs/hard", tarfile.LNKTYPE, "logs/reward.txt"),
            _entry("logs/dev", tarfile.CHRTYPE),
            _entry("logs/big.bin"),
        ],
        {
            "logs/reward.txt": b"1\n",
            "logs/evil/through-link.txt": b"x",
            "logs/../../escape.txt": b"x",
            "/etc/absolute.txt": b"x",
            "logs/big.bin": b"y" * 100,
        },
    )
    dest = tmp_path / "kept"

    report = unpack_tree(archive, dest, max_bytes=50)

    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")) == [
        "evil",
        "evil/through-link.txt",
        "reward.txt",
    ]
    assert (dest / "evil").is_dir() and not (dest / "evil").is_symlink()
    assert not outside.exists() and not (tmp_path / "escape.txt").exists()
    assert (report.files, report.bytes) == (2, 3)
    assert report.skipped == [
        f"evil: symlink to {outside} not kept",
        "'logs/../../escape.txt': name outside the copied directory",
        "'/etc/absolute.txt': name outside the copied directory",
        "hard: hardlink not kept",
        "dev: device file not kept",
        "big.bin: over the 50-byte cap",
    ]


def test_a_truncated_copy_out_keeps_what_arrived_and_says_so(tmp_path: Path) -> None:
    whole = _tar(
        [_entry("logs/a.txt"), _entry("logs/b.txt")], {"logs/a.txt": b"a" * 600, "logs/b.txt": b"b" * 600}
    )
    cut = io.BytesIO(whole.getvalue()[: 512 + 1024 + 512 + 100])  # into b.txt's content

    report = unpack_tree(cut, tmp_path / "kept")

    assert report.files == 1
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == ["a.txt"]
    assert report.skipped and report.skipped[-1].startswith("archive ended early or is unreadable")


def test_packing_never_follows_links_and_owns_entries_as_asked(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "run.sh").write_text("#!/bin/sh\n")
    (source / "run.sh").chmod(0o755)
    (source / "secret-link").symlink_to("/etc/shadow")
    buffer = io.BytesIO()

    pack_tree(source, "tests", buffer, Owner(uid=1000, gid=1001))

    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert set(members) == {"tests", "tests/run.sh", "tests/secret-link"}
    assert members["tests/secret-link"].issym() and members["tests/secret-link"].linkname == "/etc/shadow"
    assert members["tests/run.sh"].mode & 0o777 == 0o755
    assert {(m.uid, m.gid) for m in members.values()} == {(1000, 1001)}


def test_reading_a_single_file_refuses_directories_and_oversized_files() -> None:
    with pytest.raises(IsADirectoryError):
        read_single_file(_tar([_entry("logs", tarfile.DIRTYPE)], {}), 100)
    with pytest.raises(ValueError, match="over the 10-byte cap"):
        read_single_file(_tar([_entry("big")], {"big": b"z" * 11}), 10)
    assert read_single_file(_tar([_entry("ok")], {"ok": b"fine"}), 10) == b"fine"


def test_dataset_build_without_a_daemon_fails_in_one_line_saying_so(el: El) -> None:
    el.ok("dataset", "push", str(EXAMPLES / "tasks"), "--name", "demo")

    result = el("dataset", "build", "demo@1", env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})

    assert (result.code, result.stdout) == (2, "")
    assert result.stderr == (
        "el: error: cannot build images: no Docker daemon answers"
        " (start one with scripts/docker-daemon start)\n"
    )


@pytest.mark.parametrize("network", ["host", "container:envloop-other", "--privileged", ""])
def test_a_trial_container_never_shares_the_hosts_or_another_containers_network(network: str) -> None:
    with pytest.raises(ValidationError, match="a trial gets `none` or a named network of its own"):
        ContainerSpec(image="envloop/debian:bookworm", trial_id="trl_x", network=network)
    assert ContainerSpec(image="envloop/debian:bookworm", trial_id="trl_x").network == "none"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("build_timeout_sec = -5", "task.toml: environment.build_timeout_sec: must be greater than 0"),
        ("build_timeout_sec = inf", "task.toml: environment.build_timeout_sec: must be a finite number"),
        (
            'build_timeout_sec = "600"',
            "task.toml: environment.build_timeout_sec: must be a number, not string '600'",
        ),
        (
            'docker_image = "--privileged"',
            "task.toml: [environment] docker_image = '--privileged': not an image name",
        ),
        ('docker_image = "a b"', "task.toml: [environment] docker_image = 'a b': not an image name"),
    ],
)
def test_malformed_build_fields_of_a_task_become_the_reason_its_build_fails(
    tmp_path: Path, line: str, problem: str
) -> None:
    (tmp_path / "task.toml").write_text(f'version = "1.0"\n[environment]\n{line}\n')

    assert read_build_settings(tmp_path).problem == problem


def test_well_formed_build_fields_are_read(tmp_path: Path) -> None:
    (tmp_path / "task.toml").write_text(
        'version = "1.0"\n[environment]\nbuild_timeout_sec = 600.0\n'
        'docker_image = "registry:5000/org/img:1.2"\n'
    )

    settings = read_build_settings(tmp_path)

    assert (settings.build_timeout_sec, settings.docker_image, settings.problem) == (
        600.0,
        "registry:5000/org/img:1.2",
        None,
    )
