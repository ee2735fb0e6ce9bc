"""`ghcr.io/astral-sh/uv:TAG` made on this machine from uv's wheel, since nothing can be pulled.

The official image is `FROM scratch` with uv's static (musl) `uv` and `uvx` at `/uv` and `/uvx`,
`WORKDIR /io` and `ENTRYPOINT ["/uv"]`; tasks copy the binaries out of it (`COPY
--from=ghcr.io/astral-sh/uv:latest /uv /uvx /bin/`). uv's musllinux wheel carries the same static
binaries, so an image made of them runs the release it is named after. `latest` is made from
PINNED_UV_VERSION (a name that moves has to be pinned to mean one thing); `X.Y.Z` from that
version's wheel and `X.Y` from the newest `X.Y.*` one, when a build first needs them. The label
`envloop.uv-wheel` names the wheel that made the image. The official repository's other tags
(`:python3.12-bookworm`, `:alpine`, `:0.9.7-debian`) carry an operating system and are not made.

The wheel is fetched with `pip download` into a temporary directory (nothing is installed), so the
operator's pip configuration (index, proxy, certificates) applies, and the binaries must report
the version asked for before they become an image.
"""

import platform
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from envloop.environments.docker.cli import DockerError, docker_binary, first_line
from envloop.environments.docker.references import normalized, split_reference
from envloop.environments.docker.rootfs import BASE_LABEL, Log, import_tree

UV_REPOSITORY = "ghcr.io/astral-sh/uv"
PINNED_UV_VERSION = "0.13.9"
"""The release `ghcr.io/astral-sh/uv:latest` is made from."""
UV_WHEEL_LABEL = "envloop.uv-wheel"
_TAG = re.compile(r"latest|\d+\.\d+(\.\d+)?")
_ARCHITECTURES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
_MUSL_PLATFORMS = ("musllinux_1_1", "musllinux_1_2")
_PIP_TIMEOUT_SEC = 600.0


def uv_requirement(reference: str) -> str | None:
    """The uv release an image reference names, as pip's requirement (`uv==0.9.7`, `uv==0.9.*`),
    or None when it names no image of uv's that can be made here."""
    repository, tag, digest = split_reference(normalized(reference))
    if repository != UV_REPOSITORY or digest is not None or tag is None:
        return None
    match = _TAG.fullmatch(tag)
    if match is None:
        return None
    if tag == "latest":
        return f"uv=={PINNED_UV_VERSION}"
    return f"uv=={tag}" if match.group(1) else f"uv=={tag}.*"


def _run(args: list[str], what: str, timeout: float) -> str:
    try:
        done = subprocess.run(args, capture_output=True, check=False, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DockerError(f"{what} failed: {exc}") from None
    output = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
    if done.returncode != 0:
        raise DockerError(f"{what} failed: {first_line(done.stderr.decode(errors='replace') or output)}")
    return output


def _download(requirement: str, folder: Path) -> Path:
    machine = _ARCHITECTURES.get(platform.machine())
    if machine is None:
        raise DockerError(f"uv has no wheel for this machine's architecture ({platform.machine()})")
    platforms = [option for name in _MUSL_PLATFORMS for option in ("--platform", f"{name}_{machine}")]
    _run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", *platforms,
         "--disable-pip-version-check", "--dest", str(folder), requirement],
        f"pip download {requirement}",
        _PIP_TIMEOUT_SEC,
    )  # fmt: skip
    wheels = sorted(folder.glob("uv-*.whl"))
    if len(wheels) != 1:
        raise DockerError(f"pip download {requirement} left {len(wheels)} wheels, expected one")
    return wheels[0]


def _unpack_binaries(wheel: Path, version: str, into: Path) -> None:
    into.mkdir()
    (into / "io").mkdir()
    with zipfile.ZipFile(wheel) as archive:
        for name in ("uv", "uvx"):
            try:
                data = archive.read(f"uv-{version}.data/scripts/{name}")
            except KeyError:
                raise DockerError(f"{wheel.name} holds no {name} binary") from None
            target = into / name
            target.write_bytes(data)
            target.chmod(0o755)


def make_uv_image(reference: str, log: Log) -> str:
    """Make the image `reference` names (and `envloop/uv:VERSION`) from uv's wheel; returns the
    wheel's file name. DockerError, naming the step, when that cannot be done."""
    requirement = uv_requirement(reference)
    if requirement is None:
        raise DockerError(f"{reference}: not an image of uv's that can be made here")
    with tempfile.TemporaryDirectory(prefix="envloop-uv-", dir="/var/tmp") as temporary:
        folder = Path(temporary)
        log(f"{reference}: pip download {requirement} (uv's static binaries, for /uv and /uvx)")
        wheel = _download(requirement, folder)
        version = wheel.name.split("-")[1]
        root = folder / "image"
        _unpack_binaries(wheel, version, root)
        reported = _run([str(root / "uv"), "--version"], "running the wheel's uv", 60.0).strip()
        if reported.split()[:2] != ["uv", version]:
            raise DockerError(f"{wheel.name}: its uv reports {reported[:80]!r}, not uv {version}")
        name = normalized(reference)
        changes = [
            "WORKDIR /io",
            'ENTRYPOINT ["/uv"]',
            f"LABEL {BASE_LABEL}=uv-{version} {UV_WHEEL_LABEL}={wheel.name}",
        ]
        import_tree(root, name, changes, ("--owner=0", "--group=0"))
    for alias in (f"envloop/uv:{version}", f"{UV_REPOSITORY}:{version}"):
        if alias != name:
            _run([docker_binary(), "tag", name, alias], f"docker tag {alias}", 60.0)
    log(f"{name}: made from {wheel.name}")
    return wheel.name
