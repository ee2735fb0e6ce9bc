"""The base images task Dockerfiles start FROM, made on this machine since nothing can be pulled.

- `envloop/debian:bookworm`: a Debian 12 minbase root (see `rootfs`), also tagged `debian:bookworm`,
  `debian:bookworm-slim`, `debian:12` and `debian:12-slim`;
- `envloop/ubuntu:24.04`: an Ubuntu 24.04 minbase root, also tagged `ubuntu:24.04` and `ubuntu:noble`;
- `envloop/python:3.11-bookworm`: the Debian image plus Debian's Python 3.11 with pip and venv, also
  tagged `python:3.11-slim` and `python:3.11-slim-bookworm` (same release, same Python minor).

The Python image's pip installs into the system, as the official image's does. Any other name
(`python:3.13-slim`, `python:3.11` whose full image has compilers the slim one lacks, `debian:latest`
which is no longer bookworm, `ubuntu:22.04`) is left absent, so a build that needs it fails naming
it instead of running on a root that only pretends to be it. An alias that already names another
image (a real `debian:bookworm` someone loaded) is left alone.

Run as `scripts/docker-base-images [--no-python] [--no-ubuntu]`: it makes what is absent and tags
the aliases.
"""

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass

from envloop.environments.docker.cli import DockerError, docker_binary, first_line
from envloop.environments.docker.rootfs import Log, create_root_image, debian_release, ubuntu_release

BASE_LABEL = "envloop.base"
DEBIAN_IMAGE = "envloop/debian:bookworm"
UBUNTU_IMAGE = "envloop/ubuntu:24.04"
PYTHON_IMAGE = "envloop/python:3.11-bookworm"
_PYTHON_DOCKERFILE = f"""\
FROM {DEBIAN_IMAGE}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
      python3 python3-pip python3-venv python-is-python3 \\
 && rm -rf /var/lib/apt/lists/* \\
 && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED
ENV LANG=C.UTF-8
LABEL {BASE_LABEL}=python-3.11
"""


@dataclass(frozen=True)
class BaseImage:
    name: str
    aliases: tuple[str, ...]


DEBIAN = BaseImage(DEBIAN_IMAGE, ("debian:bookworm", "debian:bookworm-slim", "debian:12", "debian:12-slim"))
UBUNTU = BaseImage(UBUNTU_IMAGE, ("ubuntu:24.04", "ubuntu:noble"))
PYTHON = BaseImage(PYTHON_IMAGE, ("python:3.11-slim", "python:3.11-slim-bookworm"))


def honoured_images() -> list[str]:
    """Every base image name a task's FROM line can use here (once made)."""
    return [name for image in (DEBIAN, UBUNTU, PYTHON) for name in (image.name, *image.aliases)]


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


def create_python_image(log: Log) -> None:
    log(f"building {PYTHON_IMAGE} from {DEBIAN_IMAGE} with Debian's python3 (host network)")
    done = subprocess.run(
        [docker_binary(), "build", "--network", "host", "--progress", "plain", "-t", PYTHON_IMAGE, "-"],
        input=_PYTHON_DOCKERFILE.encode(),
        capture_output=True,
        check=False,
        env={**os.environ, "DOCKER_BUILDKIT": "1"},
    )
    if done.returncode != 0:
        raise DockerError(
            f"building {PYTHON_IMAGE} failed: {first_line(done.stderr.decode(errors='replace'))}"
        )


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


def ensure_base_images(*, python: bool = True, ubuntu: bool = True, log: Log = print) -> list[str]:
    """Make the base images that are absent and tag their aliases (idempotent); returns the names
    task Dockerfiles can now use."""
    if _labelled_ours(DEBIAN_IMAGE) is None:
        create_root_image(debian_release(), DEBIAN_IMAGE, f"{BASE_LABEL}=debian-bookworm", log)
    _tag_aliases(DEBIAN, log)
    if ubuntu:
        if _labelled_ours(UBUNTU_IMAGE) is None:
            create_root_image(ubuntu_release(), UBUNTU_IMAGE, f"{BASE_LABEL}=ubuntu-24.04", log)
        _tag_aliases(UBUNTU, log)
    if python:
        if _labelled_ours(PYTHON_IMAGE) is None:
            create_python_image(log)
        _tag_aliases(PYTHON, log)
    return [name for name in honoured_images() if _labelled_ours(name)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/docker-base-images", description="Create envloop's local base images when absent."
    )
    parser.add_argument("--no-python", action="store_true", help="without the Python 3.11 image")
    parser.add_argument("--no-ubuntu", action="store_true", help="without the Ubuntu 24.04 image")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(f"base-images: {message}", file=sys.stderr)

    try:
        ready = ensure_base_images(python=not args.no_python, ubuntu=not args.no_ubuntu, log=log)
    except (DockerError, OSError) as exc:
        log(f"error: {exc}")
        return 1
    log("ready: " + ", ".join(ready))
    return 0
