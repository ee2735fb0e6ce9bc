"""The base images task Dockerfiles start FROM, made on this machine since nothing can be pulled.

- `envloop/debian:bookworm`: a Debian 12 minbase root (see `rootfs`), also tagged `debian:bookworm`,
  `debian:bookworm-slim`, `debian:12` and `debian:12-slim`;
- `envloop/debian:trixie`: the same of Debian 13, also tagged `debian:trixie`, `debian:trixie-slim`,
  `debian:13` and `debian:13-slim`;
- `envloop/ubuntu:24.04`: an Ubuntu 24.04 minbase root, also tagged `ubuntu:24.04` and `ubuntu:noble`;
- `envloop/python:3.11-bookworm`: the bookworm image plus Debian's Python 3.11 with pip and venv,
  also tagged `python:3.11-slim` and `python:3.11-slim-bookworm`;
- `envloop/python:3.13-trixie`: the trixie image plus Debian's Python 3.13 the same way, also tagged
  `python:3.13-slim` and `python:3.13-slim-trixie`;
- `envloop/uv:<pinned>`: uv's static binaries from its wheel (see `uv_images`), also tagged
  `ghcr.io/astral-sh/uv:latest` and `ghcr.io/astral-sh/uv:<pinned>`.

A Python image is tagged as an official one only when it has the same Debian release and the same
Python minor, and its pip installs into the system as the official image's does. Any other name
(`python:3.12-slim`, whose Python no Debian release has; `python:3.13`, whose full image has
compilers the slim one lacks; `debian:latest` or `python:3-slim`, which move from release to release;
`ubuntu:22.04`) is left absent, so a build that needs it fails naming it instead of running on a
root that only pretends to be it (an operator may still substitute one image for another, openly:
see `build_settings`). An alias that already names another image (a real `debian:bookworm` someone
loaded) is left alone.

Run as `scripts/docker-base-images [--no-python] [--no-ubuntu] [--no-trixie] [--no-uv]`: it makes
what is absent and tags the aliases.
"""

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from envloop.environments.docker.cli import DockerError, docker_binary, first_line
from envloop.environments.docker.rootfs import (
    BASE_LABEL,
    Log,
    create_root_image,
    debian_release,
    ubuntu_release,
)
from envloop.environments.docker.uv_images import PINNED_UV_VERSION, UV_REPOSITORY, make_uv_image


@dataclass(frozen=True)
class BaseImage:
    name: str
    aliases: tuple[str, ...]
    make: Callable[[Log], None]


def _root(suite: str, image: str, label: str) -> Callable[[Log], None]:
    release = ubuntu_release if suite == "noble" else debian_release
    return lambda log: create_root_image(release(suite), image, f"{BASE_LABEL}={label}", log)


def _python(image: str, base: str, label: str) -> Callable[[Log], None]:
    dockerfile = f"""\
FROM {base}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
      python3 python3-pip python3-venv python-is-python3 \\
 && rm -rf /var/lib/apt/lists/* \\
 && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED
ENV LANG=C.UTF-8
LABEL {BASE_LABEL}={label}
"""

    def make(log: Log) -> None:
        log(f"building {image} from {base} with Debian's python3 (host network)")
        done = subprocess.run(
            [docker_binary(), "build", "--network", "host", "--progress", "plain", "-t", image, "-"],
            input=dockerfile.encode(),
            capture_output=True,
            check=False,
            env={**os.environ, "DOCKER_BUILDKIT": "1"},
        )
        if done.returncode != 0:
            raise DockerError(f"building {image} failed: {first_line(done.stderr.decode(errors='replace'))}")

    return make


DEBIAN_IMAGE = "envloop/debian:bookworm"
TRIXIE_IMAGE = "envloop/debian:trixie"
UBUNTU_IMAGE = "envloop/ubuntu:24.04"
PYTHON_IMAGE = "envloop/python:3.11-bookworm"
PYTHON_313_IMAGE = "envloop/python:3.13-trixie"
UV_IMAGE = f"envloop/uv:{PINNED_UV_VERSION}"

DEBIAN = BaseImage(
    DEBIAN_IMAGE,
    ("debian:bookworm", "debian:bookworm-slim", "debian:12", "debian:12-slim"),
    _root("bookworm", DEBIAN_IMAGE, "debian-bookworm"),
)
TRIXIE = BaseImage(
    TRIXIE_IMAGE,
    ("debian:trixie", "debian:trixie-slim", "debian:13", "debian:13-slim"),
    _root("trixie", TRIXIE_IMAGE, "debian-trixie"),
)
UBUNTU = BaseImage(
    UBUNTU_IMAGE, ("ubuntu:24.04", "ubuntu:noble"), _root("noble", UBUNTU_IMAGE, "ubuntu-24.04")
)
PYTHON = BaseImage(
    PYTHON_IMAGE,
    ("python:3.11-slim", "python:3.11-slim-bookworm"),
    _python(PYTHON_IMAGE, DEBIAN_IMAGE, "python-3.11"),
)
PYTHON_313 = BaseImage(
    PYTHON_313_IMAGE,
    ("python:3.13-slim", "python:3.13-slim-trixie"),
    _python(PYTHON_313_IMAGE, TRIXIE_IMAGE, "python-3.13"),
)


def _uv(log: Log) -> None:
    make_uv_image(f"{UV_REPOSITORY}:{PINNED_UV_VERSION}", log)


UV = BaseImage(UV_IMAGE, (f"{UV_REPOSITORY}:latest", f"{UV_REPOSITORY}:{PINNED_UV_VERSION}"), _uv)
_ALL = (DEBIAN, TRIXIE, UBUNTU, PYTHON, PYTHON_313, UV)


def base_image_names() -> list[str]:
    """One name of each base image, as tasks usually write it."""
    return [image.aliases[0] for image in _ALL]


def honoured_images() -> list[str]:
    """Every base image name a task's Dockerfile can use here (once made)."""
    return [name for image in _ALL for name in (image.name, *image.aliases)]


def _labelled_ours(reference: str) -> bool | None:
    """None when absent; True when the image carries our base label, False for someone else's."""
    done = subprocess.run(
        [docker_binary(), "image", "inspect", "--format", f'{{{{index .Config.Labels "{BASE_LABEL}"}}}}',
         reference],
        capture_output=True,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return None
    return done.stdout.decode().strip() not in ("", "<no value>")


def _tag_aliases(image: BaseImage, log: Log) -> None:
    for alias in image.aliases:
        if _labelled_ours(alias) is False:
            log(f"{alias} exists and is not ours: left as it is")
            continue
        done = subprocess.run([docker_binary(), "tag", image.name, alias], capture_output=True, check=False)
        if done.returncode != 0:
            raise DockerError(
                f"docker tag {alias} failed: {first_line(done.stderr.decode(errors='replace'))}"
            )


def ensure_base_images(
    *, python: bool = True, ubuntu: bool = True, trixie: bool = True, uv: bool = True, log: Log = print
) -> list[str]:
    """Make the base images that are absent and tag their aliases (idempotent); returns the names
    task Dockerfiles can now use. Without `trixie` there is no Python 3.13 image either."""
    wanted = {
        DEBIAN_IMAGE: True,
        TRIXIE_IMAGE: trixie,
        UBUNTU_IMAGE: ubuntu,
        PYTHON_IMAGE: python,
        PYTHON_313_IMAGE: python and trixie,
        UV_IMAGE: uv,
    }
    for image in _ALL:
        if not wanted[image.name]:
            continue
        if _labelled_ours(image.name) is None:
            started = time.monotonic()
            image.make(log)
            log(f"{image.name}: made in {time.monotonic() - started:.0f} s")
        _tag_aliases(image, log)
    return [name for name in honoured_images() if _labelled_ours(name)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/docker-base-images", description="Create envloop's local base images when absent."
    )
    parser.add_argument("--no-python", action="store_true", help="without the Python 3.11 and 3.13 images")
    parser.add_argument("--no-ubuntu", action="store_true", help="without the Ubuntu 24.04 image")
    parser.add_argument("--no-trixie", action="store_true", help="without Debian 13 (and Python 3.13)")
    parser.add_argument("--no-uv", action="store_true", help="without ghcr.io/astral-sh/uv:latest")
    parser.add_argument(
        "--no-egress", action="store_true", help="without the allowlist proxy's image (made on first use)"
    )
    args = parser.parse_args(argv)

    from envloop.environments.base import EnvironmentSetupError  # noqa: PLC0415 (the script alone)
    from envloop.environments.docker.squid import EGRESS_IMAGE, ensure_egress_image  # noqa: PLC0415

    def log(message: str) -> None:
        print(f"base-images: {message}", file=sys.stderr)

    try:
        ready = ensure_base_images(
            python=not args.no_python,
            ubuntu=not args.no_ubuntu,
            trixie=not args.no_trixie,
            uv=not args.no_uv,
            log=log,
        )
        if not args.no_egress:
            log(f"making {EGRESS_IMAGE} (network allowlists) when absent")
            ready.append(asyncio.run(ensure_egress_image()))
    except (DockerError, OSError, EnvironmentSetupError) as exc:
        log(f"error: {exc}")
        return 1
    log("ready: " + ", ".join(ready))
    return 0
