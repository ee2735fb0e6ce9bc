"""The base images task Dockerfiles start FROM, made on this machine since nothing can be pulled.

`envloop/debian:bookworm` is a `debootstrap --variant=minbase` Debian 12 root imported with
`docker import` (what the official `debian:bookworm` image is made from too), tagged with the names
tasks use for it. `envloop/python:3.11-bookworm` adds Debian's Python 3.11 with pip and venv, tagged
as the `python:3.11-slim` images (same Debian release, same Python minor version; pip installs into
the system as in the official image). Any other name (`ubuntu:24.04`, `python:3.13-slim`,
`debian:latest`, which is no longer bookworm) is left absent, so a build that needs it fails naming
it instead of running on a root that only pretends to be it.

The machine reaches package archives through a TLS-inspecting proxy, so both images carry this
machine's CA bundle, its extra CA files in `/usr/local/share/ca-certificates` (kept when a task
reinstalls `ca-certificates`) and a pip configuration that trusts the bundle.

Run as `scripts/docker-base-images [--no-python]`: it makes what is absent and (re)tags the
aliases that are absent or already ours; an alias naming another image (a real
`debian:bookworm` someone loaded) is left alone.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from envloop.environments.docker.cli import DockerError, docker_binary, first_line

SUITE = "bookworm"
DEBIAN_IMAGE = "envloop/debian:bookworm"
DEBIAN_ALIASES = ("debian:bookworm", "debian:bookworm-slim", "debian:12", "debian:12-slim")
PYTHON_IMAGE = "envloop/python:3.11-bookworm"
PYTHON_ALIASES = ("python:3.11-slim", "python:3.11-slim-bookworm")
BASE_LABEL = "envloop.base"
MIRROR_VARIABLE = "ENVLOOP_DEBIAN_MIRROR"
_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
_EXTRA_CAS = Path("/usr/local/share/ca-certificates")
_STANDARD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
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

Log = Callable[[str], None]


def honoured_images() -> list[str]:
    """Every base image name a task's FROM line can use here."""
    return [DEBIAN_IMAGE, *DEBIAN_ALIASES, PYTHON_IMAGE, *PYTHON_ALIASES]


def _deb822_stanzas(text: str) -> list[dict[str, str]]:
    stanzas: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if current:
                stanzas.append(current)
            current = {}
        elif not line.startswith("#") and ":" in line and not line[0].isspace():
            key, _, value = line.partition(":")
            current[key.strip().lower()] = value.strip()
    return stanzas


def debian_mirrors() -> tuple[str, str]:
    """(archive, security archive) this machine's apt uses, which the image's apt uses too."""
    archive, security = "http://deb.debian.org/debian", "http://deb.debian.org/debian-security"
    if _SOURCES.is_file():
        for stanza in _deb822_stanzas(_SOURCES.read_text()):
            suites = stanza.get("suites", "").split()
            uris = stanza.get("uris", "").split()
            if not uris:
                continue
            if f"{SUITE}-security" in suites:
                security = uris[0]
            elif SUITE in suites:
                archive = uris[0]
    return os.environ.get(MIRROR_VARIABLE) or archive, security


def _sources(archive: str, security: str) -> str:
    keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
    return (
        f"Types: deb\nURIs: {archive}\nSuites: {SUITE} {SUITE}-updates\nComponents: main\n"
        f"Signed-By: {keyring}\n\n"
        f"Types: deb\nURIs: {security}\nSuites: {SUITE}-security\nComponents: main\n"
        f"Signed-By: {keyring}\n"
    )


def _prepare_root(root: Path, archive: str, security: str) -> None:
    """Make the debootstrapped root look like the official image: apt sources of the release, no
    package lists or caches, nothing of this host (name, resolver), this machine's CAs trusted."""
    (root / "etc/apt/sources.list").unlink(missing_ok=True)
    (root / "etc/apt/sources.list.d").mkdir(parents=True, exist_ok=True)
    (root / "etc/apt/sources.list.d/debian.sources").write_text(_sources(archive, security))
    for pattern in ("var/lib/apt/lists/*", "var/cache/apt/*.bin", "var/cache/apt/archives/*.deb"):
        for path in root.glob(pattern):
            if path.is_file():
                path.unlink()
    (root / "etc/hostname").write_text("localhost\n")
    (root / "etc/resolv.conf").write_text("")
    certs = root / "etc/ssl/certs"
    certs.mkdir(parents=True, exist_ok=True)
    if _CA_BUNDLE.is_file():
        shutil.copyfile(_CA_BUNDLE, certs / "ca-certificates.crt")
    extra = root / "usr/local/share/ca-certificates"
    extra.mkdir(parents=True, exist_ok=True)
    if _EXTRA_CAS.is_dir():
        for crt in sorted(_EXTRA_CAS.glob("*.crt")):
            shutil.copyfile(crt, extra / crt.name)
    (root / "etc/pip.conf").write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")


def _run(args: list[str], *, what: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(args, input=stdin, capture_output=True, check=False, env=env)
    output = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
    if done.returncode != 0:
        raise DockerError(f"{what} failed: {first_line(output)}")
    return done.stdout.decode(errors="replace").strip()


def _labelled_ours(reference: str) -> bool | None:
    """None when absent; True when the image carries our base label, False for someone else's."""
    done = subprocess.run(
        [
            docker_binary(),
            "image",
            "inspect",
            "--format",
            f'{{{{index .Config.Labels "{BASE_LABEL}"}}}}',
            reference,
        ],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        return None
    return done.stdout.decode().strip() not in ("", "<no value>")


def create_debian_image(log: Log) -> None:
    if os.geteuid() != 0:
        raise DockerError("creating the Debian base image needs root (debootstrap)")
    if shutil.which("debootstrap") is None:
        raise DockerError("debootstrap is not installed (scripts/setup installs it)")
    archive, security = debian_mirrors()
    workdir = Path(tempfile.mkdtemp(prefix="envloop-rootfs-", dir="/var/tmp"))
    root = workdir / "root"
    try:
        log(f"debootstrap --variant=minbase {SUITE} from {archive} (about a minute)")
        _run(
            ["debootstrap", "--variant=minbase", SUITE, str(root), archive],
            what="debootstrap",
        )
        _prepare_root(root, archive, security)
        log(f"importing the root as {DEBIAN_IMAGE}")
        tar = subprocess.Popen(["tar", "-C", str(root), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        try:
            done = subprocess.run(
                [
                    docker_binary(),
                    "import",
                    "--change",
                    f"ENV PATH={_STANDARD_PATH}",
                    "--change",
                    'CMD ["bash"]',
                    "--change",
                    f"LABEL {BASE_LABEL}=debian-{SUITE}",
                    "-",
                    DEBIAN_IMAGE,
                ],
                stdin=tar.stdout,
                capture_output=True,
                check=False,
            )
        finally:
            if tar.stdout is not None:
                tar.stdout.close()
            tar.wait()
        if done.returncode != 0 or tar.returncode != 0:
            raise DockerError(f"docker import failed: {first_line(done.stderr.decode(errors='replace'))}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def create_python_image(log: Log) -> None:
    log(f"building {PYTHON_IMAGE} from {DEBIAN_IMAGE} with Debian's python3 (host network)")
    _run(
        [docker_binary(), "build", "--network", "host", "--progress", "plain", "-t", PYTHON_IMAGE, "-"],
        what=f"building {PYTHON_IMAGE}",
        stdin=_PYTHON_DOCKERFILE.encode(),
        env={**os.environ, "DOCKER_BUILDKIT": "1"},
    )


def _tag_aliases(image: str, aliases: tuple[str, ...], log: Log) -> None:
    for alias in aliases:
        if _labelled_ours(alias) is False:
            log(f"{alias} exists and is not ours: left as it is")
            continue
        _run([docker_binary(), "tag", image, alias], what=f"docker tag {alias}")


def ensure_base_images(*, python: bool = True, log: Log = print) -> None:
    """Make the base images that are absent and tag their aliases (idempotent)."""
    if _labelled_ours(DEBIAN_IMAGE) is None:
        create_debian_image(log)
    _tag_aliases(DEBIAN_IMAGE, DEBIAN_ALIASES, log)
    if python:
        if _labelled_ours(PYTHON_IMAGE) is None:
            create_python_image(log)
        _tag_aliases(PYTHON_IMAGE, PYTHON_ALIASES, log)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/docker-base-images",
        description="Create envloop's local base images when absent.",
    )
    parser.add_argument("--no-python", action="store_true", help="only the Debian image and its aliases")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(f"base-images: {message}", file=sys.stderr)

    try:
        ensure_base_images(python=not args.no_python, log=log)
    except (DockerError, OSError) as exc:
        log(f"error: {exc}")
        return 1
    log("ready: " + ", ".join(name for name in honoured_images() if _labelled_ours(name) is not None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
