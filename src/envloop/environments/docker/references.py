"""Image references as the daemon names them, so a Dockerfile's spelling and `docker image ls` agree.

`python:3.12-slim`, `docker.io/library/python:3.12-slim` and `index.docker.io/library/python:3.12-slim`
are one image; `ubuntu` is `ubuntu:latest`. Only the default registry's prefixes are dropped: an
image of another registry (`ghcr.io/astral-sh/uv:latest`) keeps its host.
"""

import re

IMAGE_REFERENCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")
"""What a task or the operator may write as an image name (no spaces, options or shell syntax)."""
_DEFAULT_REGISTRIES = ("docker.io/", "index.docker.io/", "registry-1.docker.io/")


def split_reference(reference: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of a reference; the tag is None when it names none."""
    name, _, digest = reference.partition("@")
    slash, colon = name.rfind("/"), name.rfind(":")
    if colon > slash:
        return name[:colon], name[colon + 1 :], digest or None
    return name, None, digest or None


def normalized(reference: str) -> str:
    """The reference as `docker image ls` shows it: no default registry or `library/`, and a tag
    (`latest` when it names neither a tag nor a digest)."""
    repository, tag, digest = split_reference(reference)
    for prefix in _DEFAULT_REGISTRIES:
        if repository.startswith(prefix):
            repository = repository.removeprefix(prefix)
            break
    if repository.startswith("library/") and repository.count("/") == 1:
        repository = repository.removeprefix("library/")
    if tag is None and digest is None:
        tag = "latest"
    shown = repository + (f":{tag}" if tag is not None else "")
    return shown + (f"@{digest}" if digest is not None else "")
