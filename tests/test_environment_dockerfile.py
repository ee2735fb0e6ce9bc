"""The file-only Dockerfile subset the local environment honours."""

from pathlib import Path

from envloop.tasks.dockerfile import parse_dockerfile


def context(tmp_path: Path) -> Path:
    root = tmp_path / "environment"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text("print('hi')\n")
    (root / "config.toml").write_text("x = 1\n")
    return root


def test_workdir_env_and_copies_into_the_workdir_are_honoured(tmp_path: Path) -> None:
    text = (
        "FROM ubuntu:24.04\n"
        "WORKDIR /srv\n"
        "WORKDIR project\n"
        'ENV NAME="big app" HOME_DIR=/srv\n'
        "ENV LEGACY value with spaces\n"
        "ENV FULL=${HOME_DIR}/project\n"
        "COPY src ./src\n"
        "COPY --chown=1000 config.toml /srv/project/conf/\n"
    )
    plan = parse_dockerfile(text, context(tmp_path))
    assert plan.workdir == "/srv/project"
    assert plan.env == {
        "NAME": "big app",
        "HOME_DIR": "/srv",
        "LEGACY": "value with spaces",
        "FULL": "/srv/project",
    }
    assert [(c.source.name, c.target, c.into_directory) for c in plan.copies] == [
        ("src", "/srv/project/src", False),
        ("config.toml", "/srv/project/conf", True),
    ]
    assert plan.skipped == {"FROM": 1}
    assert plan.warning() is None  # the host's system stands in for a FROM alone


def test_run_instructions_and_unreachable_copies_are_counted_not_faked(tmp_path: Path) -> None:
    text = (
        "FROM python:3.12 AS build\n"
        "RUN apt-get update && \\\n    apt-get install -y curl\n"
        "RUN <<EOF\nCOPY this-is-heredoc-body /app/\nEOF\n"
        "COPY --from=build /out /app/out\n"
        "ADD https://example.com/x.tar.gz /app/\n"
        "COPY config.toml /etc/app.toml\n"
        "COPY missing.txt /app/\n"
        "# COPY commented.txt /app/\n"
        "USER nobody\n"
        'CMD ["bash"]\n'
    )
    plan = parse_dockerfile(text, context(tmp_path))
    assert plan.copies == []
    assert plan.skipped == {
        "FROM": 1,
        "RUN": 2,
        "COPY (from a stage, URL or archive)": 1,
        "ADD (from a stage, URL or archive)": 1,
        "USER": 1,
        "COPY (outside the workdir or missing source)": 2,
    }


def test_task_workdir_override_decides_which_copies_land(tmp_path: Path) -> None:
    text = "WORKDIR /app\nCOPY . .\n"
    plan = parse_dockerfile(text, context(tmp_path), workdir_override="/workspace")
    assert plan.copies == []
    assert plan.skipped == {"COPY (outside the workdir or missing source)": 1}


def test_sources_may_not_escape_the_build_context(tmp_path: Path) -> None:
    root = context(tmp_path)
    (tmp_path / "secret.txt").write_text("host secret")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    plan = parse_dockerfile("WORKDIR /app\nCOPY ../secret.txt link.txt ./\n", root)
    assert plan.copies == []


def test_copy_dot_takes_the_whole_context(tmp_path: Path) -> None:
    root = context(tmp_path)
    plan = parse_dockerfile('WORKDIR /app\nCOPY [".", "/app/"]\n', root)
    assert [(c.source, c.target) for c in plan.copies] == [(root.resolve(), "/app")]


def test_an_add_not_done_here_is_named_as_an_add(tmp_path: Path) -> None:
    """`el dataset push` said "1 COPY (outside the workdir or missing source)" of an `ADD $URL`."""
    plan = parse_dockerfile("ARG U=x\nADD $U /secret.txt\nADD missing.txt /app/\n", context(tmp_path))
    assert plan.skipped == {"ADD (outside the workdir or missing source)": 2}
