"""What is built for a Dockerfile here: the operator's substitutions applied, and a `# syntax=`
line of the standard frontend served by the daemon's own.

A `# syntax=docker/dockerfile:1.7` line makes BuildKit pull that frontend image before reading
anything else, and nothing can be pulled here. The daemon carries the same frontend built in, so the
line is dropped from the copy that is built and the build log says so; if the Dockerfile uses a
feature newer than the built-in frontend knows, the build fails naming it. A line naming any other
frontend (`docker/dockerfile:1.7-labs`, a third party's) is refused: its syntax is not Dockerfile's.

Every Dockerfile envloop builds goes through `prepare_dockerfile`: a task's environment, a separate
verifier's `tests/Dockerfile`, a compose sidecar's build.
"""

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from envloop.environments.docker.build_reach import remote_adds, scope_cache_mounts
from envloop.environments.docker.build_settings import SUBSTITUTES_VARIABLE
from envloop.environments.docker.references import normalized
from envloop.tasks.dockerfile_images import ImageUse, ImageUseKind, read_images

_STANDARD_FRONTEND = re.compile(r"(?:docker\.io/)?docker/dockerfile:1(?:\.\d+){0,2}(?:@sha256:[0-9a-f]{64})?")


class Substitution(BaseModel):
    """One image of a Dockerfile replaced by the operator's choice."""

    model_config = ConfigDict(frozen=True)

    original: str
    substitute: str
    where: tuple[ImageUseKind, ...]

    def describe(self) -> str:
        """The line every trial of the image shows."""
        places = " and ".join(self.where)
        return (
            f"image substituted ({SUBSTITUTES_VARIABLE}): {places} {self.original} was built with "
            f"{self.substitute} instead"
        )


@dataclass(frozen=True)
class NeededImage:
    kind: ImageUseKind
    image: str


@dataclass(frozen=True)
class PreparedDockerfile:
    text: str
    """The Dockerfile to build."""
    changed: bool
    """Whether `text` differs from the task's own Dockerfile."""
    needed: list[NeededImage]
    """The images the build needs from the daemon, after substitution, each once."""
    unresolved: list[str]
    substitutions: list[Substitution]
    builtin_frontend: str | None
    """The `# syntax=` value served by the built-in frontend (its line is not in `text`)."""
    refused_frontend: str | None
    """A `# syntax=` value naming another frontend: such a Dockerfile cannot be built here."""
    refusals: list[tuple[str, str]] = field(default_factory=list)
    """(what, why) of each instruction that cannot be built here (see `build_reach`)."""

    def scoped_text(self, scope: str) -> str:
        """`text` with every cache mount's id under `scope` (see `build_reach.cache_scope`)."""
        return scope_cache_mounts(self.text, scope)[0]

    @property
    def cache_suffix(self) -> str:
        """What the substitutions add to the image's name: changing the map rebuilds."""
        if not self.substitutions:
            return ""
        pairs = "\n".join(sorted(f"{s.original}={s.substitute}" for s in self.substitutions))
        return "-" + hashlib.sha256(pairs.encode()).hexdigest()[:12]

    def frontend_note(self) -> str | None:
        if self.builtin_frontend is None:
            return None
        return (
            f"# syntax={self.builtin_frontend}: built with the daemon's built-in Dockerfile frontend "
            "(its image cannot be pulled here)"
        )


def _rewritten(lines: list[str], use: ImageUse, substitute: str) -> bool:
    """Replace the use's reference in its own lines; False when it cannot be found there."""
    written = re.escape(use.written)
    pattern = {
        "FROM": rf"(?<![^\s\\`]){written}(?![^\s\\`])",
        "COPY --from": rf"(?<=--from=){written}(?![^\s\\`])",
        "RUN --mount from": rf"(?<=[=,]from=){written}(?=[,\s\\`]|$)",
    }[use.kind]
    span = "".join(lines[use.lines.start : use.lines.stop])
    replaced, count = re.subn(pattern, lambda _: substitute, span, count=1)
    if count == 0:
        return False
    lines[use.lines.start : use.lines.stop] = [replaced] + [""] * (len(use.lines) - 1)
    return True


def prepare_dockerfile(
    dockerfile: str, substitutes: Mapping[str, str], build_args: Mapping[str, str] | None = None
) -> PreparedDockerfile:
    """The Dockerfile as it is built here, with what changed, what it needs from the daemon and
    what cannot be built.

    `substitutes` is the operator's map (see `build_settings.image_substitutes`), keyed by
    normalized reference; `build_args` the `--build-arg` values the build gets."""
    lines = dockerfile.splitlines(keepends=True)
    found = read_images(dockerfile, build_args)
    needed: dict[str, NeededImage] = {}
    applied: dict[tuple[str, str], list[ImageUseKind]] = {}
    for use in found.uses:
        image = use.image
        substitute = substitutes.get(normalized(use.image))
        if substitute is not None and _rewritten(lines, use, substitute):
            kinds = applied.setdefault((use.image, substitute), [])
            kinds += [] if use.kind in kinds else [use.kind]
            image = substitute
        needed.setdefault(normalized(image), NeededImage(use.kind, image))
    builtin = refused = None
    if "syntax" in found.directives:
        line, value = found.directives["syntax"]
        if _STANDARD_FRONTEND.fullmatch(value):
            # A blank line keeps the builder's line numbers those of the task's own file; only
            # directives after it would stop being directives, so then the line goes instead.
            later = any(other > line for other, _ in found.directives.values())
            builtin, lines[line] = value, "" if later else "\n"
        else:
            refused = value
    text = "".join(lines)
    return PreparedDockerfile(
        text=text,
        changed=text != dockerfile,
        needed=list(needed.values()),
        unresolved=found.unresolved,
        substitutions=[
            Substitution(original=original, substitute=substitute, where=tuple(kinds))
            for (original, substitute), kinds in applied.items()
        ],
        builtin_frontend=builtin,
        refused_frontend=refused,
        refusals=[
            *((use, "names its image through a variable with no value here") for use in found.unresolved),
            *remote_adds(dockerfile, build_args),
            *scope_cache_mounts(text, "")[1],
        ],
    )
