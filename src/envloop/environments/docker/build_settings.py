"""The operator's settings for image builds (`envloop.settings`), and the substitution map parsed.

- ENVLOOP_DOCKER_BUILD_NETWORK: the network of `RUN` steps (`default`, `host` or `none`).
- ENVLOOP_DOCKER_BUILD_TIMEOUT_SEC: how long one build may take.
- ENVLOOP_IMAGE_SUBSTITUTES: `FROM=TO` pairs, comma-separated, naming images a Dockerfile asks for
  that this machine cannot have and the image to build with instead (`python:3.12-slim=python:3.13-slim`).
  A substitution changes what a task measures, so it is never silent: the build records it, the
  task's image name carries it (changing the map rebuilds) and every trial of that image says it.

A bad value is a BuildConfigError whose one-line message names the variable.
"""

from typing import Literal

from envloop.environments.docker.cli import docker
from envloop.environments.docker.references import IMAGE_REFERENCE, normalized
from envloop.settings import Settings, SettingsError, env_name, settings

SUBSTITUTES_VARIABLE = env_name("image_substitutes")
_SUBSTITUTES_EXAMPLE = "python:3.12-slim=python:3.13-slim"

BuildNetwork = Literal["default", "host", "none"]


class BuildConfigError(ValueError):
    """An operator setting for builds is not valid; the message names it."""


def _build_settings() -> Settings:
    try:
        return settings()
    except SettingsError as exc:
        raise BuildConfigError(str(exc)) from None


def build_network(value: str | None = None) -> BuildNetwork | None:
    """The network chosen for image builds: `value`, else ENVLOOP_DOCKER_BUILD_NETWORK; None when
    neither says (see `effective_build_network`)."""
    if value is None:
        return _build_settings().docker_build_network
    if value not in ("default", "host", "none"):
        raise BuildConfigError(f"build network {value!r}: expected default, host or none")
    return value  # type: ignore[return-value]


async def effective_build_network(value: str | None = None) -> BuildNetwork:
    """The chosen network, or when none was chosen the daemon's default where it has a bridge and
    `none` where it has not: a daemon started with `--bridge=none` fails every RUN step of a
    `default` build ("network bridge not found"), while `none` still runs those that need no
    network, and the ones that do fail naming their command."""
    chosen = build_network(value)
    if chosen is not None:
        return chosen
    has_bridge = await docker(["network", "inspect", "bridge"], check=False)
    return "default" if has_bridge.returncode == 0 else "none"


def build_timeout() -> float:
    return _build_settings().docker_build_timeout_sec


def image_substitutes(raw: str | None = None) -> dict[str, str]:
    """The operator's substitution map (`raw`, else ENVLOOP_IMAGE_SUBSTITUTES), keyed by the
    replaced image as the daemon names it (`docker.io/library/python:3.12-slim` is `python:3.12-slim`).

    Refused: a pair that is not `FROM=TO`, a name that is not an image reference, an image replaced
    twice or by itself, and a chain (`a=b,b=c`): each substitution is applied once, so a chain would
    mean something else than it reads."""
    text = raw if raw is not None else _build_settings().image_substitutes
    found: dict[str, str] = {}
    for pair in (part.strip() for part in text.split(",")):
        if not pair:
            continue
        original, equals, substitute = (side.strip() for side in pair.partition("="))
        if not equals or not original or not substitute:
            raise _bad(f"{pair[:80]!r} is not FROM=TO")
        for name in (original, substitute):
            if not IMAGE_REFERENCE.fullmatch(name):
                raise _bad(f"{name[:80]!r} is not an image name")
        key = normalized(original)
        if key in found:
            raise _bad(f"{original} is replaced twice")
        if normalized(substitute) == key:
            raise _bad(f"{original} is replaced by itself")
        found[key] = substitute
    chained = next((to for to in found.values() if normalized(to) in found), None)
    if chained is not None:
        raise _bad(f"{chained} is both a replacement and replaced (substitutions are applied once)")
    return found


def _bad(problem: str) -> BuildConfigError:
    return BuildConfigError(
        f"{SUBSTITUTES_VARIABLE}: {problem} (expected comma-separated FROM=TO pairs, "
        f"such as {_SUBSTITUTES_EXAMPLE})"
    )
