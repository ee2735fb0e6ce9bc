"""Distribution roots made with `debootstrap --variant=minbase` and imported with `docker import`.

This is how the official `debian` and `ubuntu` images are made too (a minimal root from the
distribution's own archive), so an image made here is the release it is named after, not a look-alike.
Each root gets its release's apt sources (no package lists, as in the official images), nothing of
this host (name, resolver), and this machine's CA bundle: package downloads go through a
TLS-inspecting proxy. The extra CA files also go to `/usr/local/share/ca-certificates`, so a task
that reinstalls `ca-certificates` keeps them, and `/etc/pip.conf` trusts the bundle.

Ubuntu's archive is checked against Ubuntu's 2018 archive signing key, pinned here by fingerprint:
the key is taken from Ubuntu's own keyring package and used only if its fingerprint matches, so a
keyring altered on the way cannot make debootstrap trust anything else.
"""

import os
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envloop.environments.docker.cli import DockerError, docker_binary, first_line
from envloop.settings import settings

STANDARD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
UBUNTU_KEY_FINGERPRINT = "F6ECB3762474EDA9D21B7022871920D1991BC93C"
"""Ubuntu Archive Automatic Signing Key (2018) <ftpmaster@ubuntu.com>."""
_UBUNTU_KEYRING_PACKAGE = "pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb"
_DEBIAN_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
_EXTRA_CAS = Path("/usr/local/share/ca-certificates")

BASE_LABEL = "envloop.base"
"""Carried by every image envloop makes in place of one it cannot pull."""

Log = Callable[[str], None]


@dataclass(frozen=True)
class Release:
    """One distribution release debootstrap can make a root of."""

    distribution: str
    suite: str
    archive: str
    security: str
    sources_file: str
    suites: str
    security_suite: str
    components: str
    keyring_in_image: str


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


def debian_release(suite: str = "bookworm") -> Release:
    """Debian, from the archive this machine's apt uses (or ENVLOOP_DEBIAN_MIRROR)."""
    archive, security = "http://deb.debian.org/debian", "http://deb.debian.org/debian-security"
    if _DEBIAN_SOURCES.is_file():
        for stanza in _deb822_stanzas(_DEBIAN_SOURCES.read_text()):
            suites, uris = stanza.get("suites", "").split(), stanza.get("uris", "").split()
            if uris and f"{suite}-security" in suites:
                security = uris[0]
            elif uris and suite in suites:
                archive = uris[0]
    return Release(
        distribution="debian",
        suite=suite,
        archive=settings().debian_mirror or archive,
        security=security,
        sources_file="debian.sources",
        suites=f"{suite} {suite}-updates",
        security_suite=f"{suite}-security",
        components="main",
        keyring_in_image="/usr/share/keyrings/debian-archive-keyring.gpg",
    )


def ubuntu_release(suite: str = "noble") -> Release:
    """Ubuntu, from its archive (or ENVLOOP_UBUNTU_MIRROR), with the components its image lists."""
    return Release(
        distribution="ubuntu",
        suite=suite,
        archive=settings().ubuntu_mirror or "http://archive.ubuntu.com/ubuntu",
        security="http://security.ubuntu.com/ubuntu",
        sources_file="ubuntu.sources",
        suites=f"{suite} {suite}-updates {suite}-backports",
        security_suite=f"{suite}-security",
        components="main universe restricted multiverse",
        keyring_in_image="/usr/share/keyrings/ubuntu-archive-keyring.gpg",
    )


def _sources(release: Release) -> str:
    def stanza(uri: str, suites: str) -> str:
        return (
            f"Types: deb\nURIs: {uri}\nSuites: {suites}\nComponents: {release.components}\n"
            f"Signed-By: {release.keyring_in_image}\n"
        )

    return stanza(release.archive, release.suites) + "\n" + stanza(release.security, release.security_suite)


def _run(args: list[str], *, what: str) -> None:
    done = subprocess.run(args, capture_output=True, check=False)
    if done.returncode != 0:
        output = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        raise DockerError(f"{what} failed: {first_line(output)}")


def _ubuntu_keyring(workdir: Path, release: Release) -> Path:
    """A keyring holding only Ubuntu's pinned archive key, taken from Ubuntu's keyring package."""
    if shutil.which("gpg") is None:
        raise DockerError("gpg is not installed (scripts/setup installs it)")
    package = workdir / "ubuntu-keyring.deb"
    url = f"{release.archive}/{_UBUNTU_KEYRING_PACKAGE}"
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            package.write_bytes(response.read(16 << 20))
    except OSError as exc:
        raise DockerError(f"downloading Ubuntu's keyring package failed: {exc}") from None
    unpacked = workdir / "keyring-package"
    _run(["dpkg-deb", "-x", str(package), str(unpacked)], what="keyring unpacking")
    keyring = workdir / "ubuntu-archive-key.gpg"
    home = workdir / "gnupg"
    home.mkdir(mode=0o700)
    source = unpacked / "usr/share/keyrings/ubuntu-archive-keyring.gpg"
    exported = subprocess.run(
        ["gpg", "--homedir", str(home), "--no-default-keyring", "--keyring", str(source),
         "--export", UBUNTU_KEY_FINGERPRINT],
        capture_output=True,
        check=False,
    )  # fmt: skip
    if exported.returncode != 0 or not exported.stdout:
        raise DockerError(f"Ubuntu's keyring package holds no key {UBUNTU_KEY_FINGERPRINT}")
    keyring.write_bytes(exported.stdout)
    return keyring


def _prepare(root: Path, release: Release) -> None:
    (root / "etc/apt/sources.list").unlink(missing_ok=True)
    (root / "etc/apt/sources.list.d").mkdir(parents=True, exist_ok=True)
    (root / "etc/apt/sources.list.d" / release.sources_file).write_text(_sources(release))
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
    if release.distribution == "ubuntu":
        # The official ubuntu:24.04 image has this user (uid 1000); tasks written for it may use it.
        _run(["chroot", str(root), "useradd", "--uid", "1000", "--create-home", "--shell", "/bin/bash",
              "ubuntu"], what="adding the ubuntu user")  # fmt: skip


def import_tree(root: Path, image: str, changes: list[str], tar_options: tuple[str, ...] = ()) -> None:
    """`docker import` the tree under `root` as `image`, with Dockerfile `changes` to its config."""
    tar = subprocess.Popen(
        ["tar", "-C", str(root), "--numeric-owner", *tar_options, "-c", "."], stdout=subprocess.PIPE
    )
    try:
        done = subprocess.run(
            [docker_binary(), "import", *(f"--change={change}" for change in changes), "-", image],
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


def create_root_image(release: Release, image: str, label: str, log: Log) -> None:
    """debootstrap the release, prepare it, and import it as `image` carrying `label`."""
    if os.geteuid() != 0:
        raise DockerError(f"creating {image} needs root (debootstrap)")
    if shutil.which("debootstrap") is None:
        raise DockerError("debootstrap is not installed (scripts/setup installs it)")
    workdir = Path(tempfile.mkdtemp(prefix="envloop-rootfs-", dir="/var/tmp"))
    root = workdir / "root"
    try:
        args = ["debootstrap", "--variant=minbase"]
        if release.distribution == "ubuntu":
            args.append(f"--keyring={_ubuntu_keyring(workdir, release)}")
        args += [release.suite, str(root), release.archive]
        if release.distribution == "ubuntu":
            # Older debootstraps lack a script per new Ubuntu release; every one since 7.10 uses this.
            args.append("/usr/share/debootstrap/scripts/gutsy")
        log(f"debootstrap --variant=minbase {release.suite} from {release.archive} (about a minute)")
        _run(args, what=f"debootstrap {release.suite}")
        _prepare(root, release)
        log(f"importing the root as {image}")
        import_tree(root, image, [f"ENV PATH={STANDARD_PATH}", 'CMD ["bash"]', f"LABEL {label}"])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
