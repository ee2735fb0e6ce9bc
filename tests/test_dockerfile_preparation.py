"""What is built for a Dockerfile here, without a daemon: images it uses, substitutions, `# syntax=`
lines, the operator's map and the reasons an image cannot be had."""

import pytest

from envloop.environments.docker.availability import missing_images
from envloop.environments.docker.build_settings import BuildConfigError, image_substitutes
from envloop.environments.docker.prepare import prepare_dockerfile
from envloop.environments.docker.references import normalized
from envloop.environments.docker.uv_images import PINNED_UV_VERSION, uv_requirement
from envloop.tasks.dockerfile_images import read_images

PY312 = {"python:3.12-slim": "python:3.13-slim"}


def test_copy_from_and_run_mount_from_an_image_are_uses_but_stages_and_indexes_are_not() -> None:
    dockerfile = (
        "FROM debian:bookworm AS base\n"
        "COPY --from=ghcr.io/astral-sh/uv:0.9.7 /uv /uvx /bin/\n"
        "COPY --chown=1:1 --from=base /etc/os-release /x\n"
        "COPY --from=0 /etc/hostname /y\n"
        "RUN --mount=type=bind,from=busybox:1.36,source=/bin,target=/b \\\n    ls /b\n"
        "RUN --mount=type=cache,target=/c,from=base true\n"
    )

    found = read_images(dockerfile)

    assert [(use.kind, use.image) for use in found.uses] == [
        ("FROM", "debian:bookworm"),
        ("COPY --from", "ghcr.io/astral-sh/uv:0.9.7"),
        ("RUN --mount from", "busybox:1.36"),
    ]


def test_heredoc_bodies_and_comments_are_not_instructions_and_directives_count_only_at_the_top() -> None:
    dockerfile = (
        "# syntax=docker/dockerfile:1.7\n"
        "# escape=\\\n"
        "FROM debian:bookworm\n"
        "# syntax=someone/else:1\n"
        "RUN <<EOF\n"
        "FROM alpine:3.22\n"
        "EOF\n"
        "COPY <<-END /etc/motd\n"
        "\tCOPY --from=nvidia/cuda:12.1.0 /x /y\n"
        "END\n"
    )

    found = read_images(dockerfile)

    assert found.images == ["debian:bookworm"]
    assert found.directives == {"syntax": (0, "docker/dockerfile:1.7"), "escape": (1, "\\")}


def test_a_backtick_escape_directive_joins_backtick_continuations() -> None:
    found = read_images("# escape=`\nFROM `\n  ubuntu:24.04\nRUN echo a `\n  b\n")

    assert [(use.image, use.lines) for use in found.uses] == [("ubuntu:24.04", range(1, 3))]


def test_substitution_rewrites_from_copy_and_mount_uses_in_place_and_says_where() -> None:
    dockerfile = (
        "ARG BASE=docker.io/library/python:3.12-slim\n"
        "FROM ${BASE} AS app\n"
        "COPY --from=python:3.12-slim /usr/local/bin/python3 /opt/\n"
        "FROM --platform=linux/amd64 \\\n"
        "    python:3.12-slim\n"
        "RUN --mount=type=bind,from=python:3.12-slim,target=/p true\n"
        "RUN echo python:3.12-slim stays in a command\n"
    )

    plan = prepare_dockerfile(dockerfile, PY312)

    assert plan.text == (
        "ARG BASE=docker.io/library/python:3.12-slim\n"
        "FROM python:3.13-slim AS app\n"
        "COPY --from=python:3.13-slim /usr/local/bin/python3 /opt/\n"
        "FROM --platform=linux/amd64 \\\n"
        "    python:3.13-slim\n"
        "RUN --mount=type=bind,from=python:3.13-slim,target=/p true\n"
        "RUN echo python:3.12-slim stays in a command\n"
    )
    assert [(n.kind, n.image) for n in plan.needed] == [("FROM", "python:3.13-slim")]
    assert [(s.original, s.substitute, s.where) for s in plan.substitutions] == [
        ("docker.io/library/python:3.12-slim", "python:3.13-slim", ("FROM",)),
        ("python:3.12-slim", "python:3.13-slim", ("COPY --from", "FROM", "RUN --mount from")),
    ]
    assert plan.changed
    assert plan.substitutions[1].describe() == (
        "image substituted (ENVLOOP_IMAGE_SUBSTITUTES): COPY --from and FROM and RUN --mount from "
        "python:3.12-slim was built with python:3.13-slim instead"
    )


def test_the_cache_suffix_changes_with_the_substitutions_that_apply_and_only_those() -> None:
    dockerfile = "FROM python:3.12-slim\n"

    plain = prepare_dockerfile(dockerfile, {})
    first = prepare_dockerfile(dockerfile, PY312)
    unrelated = prepare_dockerfile(dockerfile, {**PY312, "alpine:3.22": "debian:bookworm"})
    other = prepare_dockerfile(dockerfile, {"python:3.12-slim": "python:3.11-slim"})

    assert plain.cache_suffix == "" and not plain.changed and plain.text == dockerfile
    assert first.cache_suffix.startswith("-") and len(first.cache_suffix) == 13
    assert unrelated.cache_suffix == first.cache_suffix
    assert other.cache_suffix not in ("", first.cache_suffix)


@pytest.mark.parametrize(
    "frontend",
    [
        "docker/dockerfile:1",
        "docker/dockerfile:1.7",
        "docker.io/docker/dockerfile:1.7.1",
        "docker/dockerfile:1.4@sha256:" + "a" * 64,
    ],
)
def test_a_standard_frontend_line_is_dropped_and_noted(frontend: str) -> None:
    plan = prepare_dockerfile(f"# syntax={frontend}\n# escape=\\\nFROM debian:bookworm\n", {})
    alone = prepare_dockerfile(f"# syntax={frontend}\nFROM debian:bookworm\nRUN <<EOF\n", {})

    # The line goes when a directive follows it, else it is blanked so line numbers stay the task's.
    assert plan.text == "# escape=\\\nFROM debian:bookworm\n"
    assert alone.text == "\nFROM debian:bookworm\nRUN <<EOF\n"
    assert (plan.builtin_frontend, plan.refused_frontend) == (frontend, None)
    assert plan.frontend_note() == (
        f"# syntax={frontend}: built with the daemon's built-in Dockerfile frontend "
        "(its image cannot be pulled here)"
    )


@pytest.mark.parametrize(
    "frontend",
    ["docker/dockerfile:1.7-labs", "docker/dockerfile:2", "tonistiigi/dockerfile:1", "docker/dockerfile"],
)
def test_any_other_frontend_is_refused_with_one_line(frontend: str) -> None:
    plan = prepare_dockerfile(f"#syntax = {frontend}\nFROM debian:bookworm\n", {})

    [refusal] = missing_images(plan, frozenset({"debian:bookworm"}))

    assert plan.refused_frontend == frontend
    assert refusal.describe() == (
        f"# syntax={frontend}: only the standard frontend docker/dockerfile:1.x can build here (the "
        "daemon's built-in one); this one would have to be pulled"
    )


def test_references_are_compared_as_the_daemon_names_them() -> None:
    assert normalized("docker.io/library/python:3.12-slim") == "python:3.12-slim"
    assert normalized("index.docker.io/library/ubuntu") == "ubuntu:latest"
    assert normalized("library/alpine:3.22") == "alpine:3.22"
    assert normalized("ghcr.io/astral-sh/uv") == "ghcr.io/astral-sh/uv:latest"
    assert normalized("localhost:5000/x") == "localhost:5000/x:latest"
    assert normalized("python@sha256:" + "b" * 64) == "python@sha256:" + "b" * 64


def test_substitution_map_is_read_normalized() -> None:
    parsed = image_substitutes(" docker.io/library/python:3.12-slim = python:3.13-slim , alpine=debian:13 ,")

    assert parsed == {"python:3.12-slim": "python:3.13-slim", "alpine:latest": "debian:13"}
    assert image_substitutes("") == {}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("python:3.12-slim", "'python:3.12-slim' is not FROM=TO"),
        ("python:3.12-slim=", "'python:3.12-slim=' is not FROM=TO"),
        ("a=b=c", "'b=c' is not an image name"),
        ("python:3.12-slim=python 3.13", "'python 3.13' is not an image name"),
        ("a=b,a=c", "a is replaced twice"),
        ("python:3.12-slim=docker.io/python:3.12-slim", "python:3.12-slim is replaced by itself"),
        ("a=b,b=c", "b is both a replacement and replaced (substitutions are applied once)"),
        ("$(reboot)=x", "'$(reboot)' is not an image name"),
    ],
)
def test_a_bad_substitution_map_is_one_line_naming_the_variable(value: str, problem: str) -> None:
    with pytest.raises(BuildConfigError) as raised:
        image_substitutes(value)

    assert str(raised.value) == (
        f"ENVLOOP_IMAGE_SUBSTITUTES: {problem} (expected comma-separated FROM=TO pairs, such as "
        "python:3.12-slim=python:3.13-slim)"
    )


def test_uv_images_named_by_version_are_makeable_and_others_of_uv_are_not() -> None:
    assert uv_requirement("ghcr.io/astral-sh/uv:latest") == f"uv=={PINNED_UV_VERSION}"
    assert uv_requirement("ghcr.io/astral-sh/uv") == f"uv=={PINNED_UV_VERSION}"
    assert uv_requirement("ghcr.io/astral-sh/uv:0.9.7") == "uv==0.9.7"
    assert uv_requirement("ghcr.io/astral-sh/uv:0.9") == "uv==0.9.*"
    for other in (
        "ghcr.io/astral-sh/uv:python3.12-bookworm",
        "ghcr.io/astral-sh/uv:0.9.7-alpine",
        "ghcr.io/astral-sh/uv@sha256:" + "c" * 64,
        "astral/uv:0.9.7",
        "ghcr.io/astral-sh/uv:0.9.7;rm",
    ):
        assert uv_requirement(other) is None, other


def test_each_unavailable_image_says_why_and_what_would_help() -> None:
    dockerfile = (
        "FROM python:3.12-slim\n"
        "FROM python:3.13\n"
        "FROM python:3.13-slim\n"
        "FROM alpine:3.22\n"
        "FROM mcr.microsoft.com/windows/servercore:ltsc2022\n"
        "FROM nvidia/cuda:12.1.0-devel-ubuntu22.04\n"
        "COPY --from=ghcr.io/astral-sh/uv:latest /uv /bin/\n"
        "COPY --from=ghcr.io/astral-sh/uv:python3.12-bookworm /uv /bin/\n"
        "FROM debian:bookworm\n"
    )
    present = frozenset({"debian:bookworm"})

    reasons = [m.describe() for m in missing_images(prepare_dockerfile(dockerfile, {}), present)]

    assert reasons == [
        "FROM python:3.12-slim: base image not available on this machine (no Debian release has Python "
        "3.12, so it cannot be made here; ENVLOOP_IMAGE_SUBSTITUTES=python:3.12-slim=python:3.13-slim "
        "would build the task on Python 3.13)",
        "FROM python:3.13: base image not available on this machine (only python:3.13-slim is made here "
        "(the same Debian release and Python as the official one); "
        "ENVLOOP_IMAGE_SUBSTITUTES=python:3.13=python:3.13-slim would build with it)",
        "FROM python:3.13-slim: base image not available on this machine (not made on this machine yet "
        "(scripts/docker-base-images makes it))",
        "FROM alpine:3.22: base image not available on this machine (nothing can be pulled here; images "
        "here: debian:bookworm (scripts/docker-base-images))",
        "FROM mcr.microsoft.com/windows/servercore:ltsc2022: base image not available on this machine "
        "(a Windows image, and this machine runs Linux containers)",
        "FROM nvidia/cuda:12.1.0-devel-ubuntu22.04: base image not available on this machine (nothing "
        "can be pulled here; images here: debian:bookworm (scripts/docker-base-images))",
        "COPY --from ghcr.io/astral-sh/uv:python3.12-bookworm: image not available on this machine (of "
        "uv's images only the bare latest, X.Y and X.Y.Z are made here (this tag carries a system))",
    ]
    substituted = prepare_dockerfile("FROM python:3.12-slim\n", PY312)
    assert missing_images(substituted, frozenset({"python:3.13-slim"})) == []


def refusals(dockerfile: str, build_args: dict[str, str] | None = None) -> list[str]:
    return [what for what, _ in prepare_dockerfile(dockerfile, {}, build_args).refusals]


@pytest.mark.parametrize(
    "source",
    [
        "http://127.0.0.1:8000/secret.txt",
        "https://example.org/x.tar.gz",
        "git@github.com:someone/repo.git",
        "ssh://git@10.0.0.1/repo.git",
        "HTTP://169.254.169.254/latest/meta-data/",
    ],
)
def test_add_of_anything_the_builder_would_fetch_is_refused(source: str) -> None:
    assert refusals(f"FROM debian:bookworm\nADD {source} /x\n") == [f"ADD {source}"]
    assert refusals(f'FROM debian:bookworm\nADD --chmod=644 ["{source}", "/x"]\n') == [f"ADD {source}"]
    assert refusals(f"FROM debian:bookworm AS a\nONBUILD ADD {source} /x\nFROM a\n") == [f"ADD {source}"]


def test_add_through_a_variable_is_refused_when_any_value_could_be_a_url() -> None:
    base = "FROM debian:bookworm\n"
    assert refusals(base + "ARG U=http://127.0.0.1/s\nADD $U /x\n") == ["ADD $U"]
    assert refusals(base + "ENV U http://127.0.0.1/s\nADD ${U} /x\n") == ["ADD ${U}"]
    assert refusals(base + "ARG U\nADD $U /x\n", {"U": "http://127.0.0.1/s"}) == ["ADD $U"]
    assert refusals(base + "ADD ${U:-http://127.0.0.1/s} /x\n") == ["ADD ${U:-http://127.0.0.1/s}"]
    assert refusals(base + "ARG A=$B\nARG B=x\nADD $A /x\n") == ["ADD $A"]
    assert refusals(base + "ADD $FROM_THE_BASE_IMAGE /x\n") == ["ADD $FROM_THE_BASE_IMAGE"]
    # Quotes hide which name a piece belongs to: every name of such an instruction is suspect.
    assert refusals(base + 'ENV A="x http://127.0.0.1/s" B=y\nADD $B /x\n') == ["ADD $B"]
    # Local files stay ADD's own business (archives are unpacked, as Docker does).
    local = "ARG F=app.tar.gz\nARG U\nADD $F ${U:-src} app-$TARGETARCH.tgz ./ /x/\nADD <<EOF /y\nhi\nEOF\n"
    assert refusals(base + local) == []
    assert refusals(base + "COPY http.txt /x\n") == []


def test_cache_mounts_get_ids_of_the_image_alone() -> None:
    dockerfile = (
        "FROM debian:bookworm\n"
        "RUN --mount=type=cache,id=shared,target=/root/.cache/pip pip install x\n"
        "RUN --mount=type=cache,target=/var/cache/apt \\\n"
        "    --mount=type=bind,source=a,target=/a \\\n"
        "    apt-get update\n"
        "RUN --mount=TYPE=cache,ID=other,dst=/c,sharing=locked true\n"
    )
    plan = prepare_dockerfile(dockerfile, {})

    assert plan.refusals == []
    assert plan.scoped_text("envloop-abc") == (
        "FROM debian:bookworm\n"
        "RUN --mount=type=cache,target=/root/.cache/pip,id=envloop-abc/shared pip install x\n"
        "RUN --mount=type=cache,target=/var/cache/apt,id=envloop-abc//var/cache/apt \\\n"
        "    --mount=type=bind,source=a,target=/a \\\n"
        "    apt-get update\n"
        "RUN --mount=TYPE=cache,dst=/c,sharing=locked,id=envloop-abc/other true\n"
    )


def test_cache_mounts_that_cannot_be_rewritten_safely_are_refused() -> None:
    base = "FROM debian:bookworm\n"
    # An escape right after the flag joins the next line to it: that line could carry another id.
    joined = base + "RUN --mount=type=cache,target=/c\\\n,id=shared true\n"
    quoted = base + 'RUN --mount="type=cache,id=shared,target=/c" true\n'
    pieces = base + 'RUN --mount=type="ca"che,id=shared,target=/c true\n'
    variable = base + "ARG T=cache\nRUN --mount=type=$T,id=shared,target=/c true\n"

    assert refusals(joined) == ["RUN --mount=type=cache,target=/c"]
    assert refusals(quoted) == ['RUN --mount="type=cache,id=shared,target=/c"']
    assert refusals(pieces) == ['RUN --mount=type="ca"che,id=shared,target=/c']
    assert refusals(variable) == ["RUN --mount=type=$T,id=shared,target=/c"]


def test_an_image_named_through_a_variable_follows_build_args_and_stage_args_or_is_refused() -> None:
    dockerfile = (
        "ARG BASE=debian:bookworm\nFROM $BASE\nARG SRC=envloop/task:abc\nCOPY --from=$SRC /a /a\n"
        "ENV MOUNTED=busybox:1.36\nRUN --mount=type=bind,from=$MOUNTED,target=/m true\n"
        "COPY --from=$NOWHERE /b /b\n"
    )
    found = read_images(dockerfile, {"BASE": "ubuntu:24.04"})

    assert found.images == ["ubuntu:24.04", "envloop/task:abc", "busybox:1.36"]
    assert found.unresolved == ["COPY --from $NOWHERE"]
    assert refusals(dockerfile) == ["COPY --from $NOWHERE"]
