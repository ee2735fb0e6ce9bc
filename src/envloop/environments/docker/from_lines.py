"""The images a Dockerfile starts FROM, read before building so a missing one is named plainly.

Nothing can be pulled on these machines, so a build whose base image is not present locally can
only fail; checking first turns the builder's registry error into "FROM ubuntu:24.04: not
available here". Stage names (`FROM base AS build` … `FROM build`) and `scratch` are not images,
and `ARG` defaults declared before the first FROM are substituted as the builder would.
"""

import re

_VARIABLE = re.compile(r"\$(?:\{(\w+)(?::?-([^}]*))?\}|(\w+))")
_UNRESOLVED = re.compile(r"\$")


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    if current.strip():
        lines.append(current)
    return lines


def _substitute(value: str, args: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        if name in args:
            return args[name]
        default = match.group(2)
        return default if default is not None else match.group(0)

    return _VARIABLE.sub(replace, value)


def base_images(dockerfile: str) -> tuple[list[str], list[str]]:
    """(images the Dockerfile needs from the daemon, FROM arguments that could not be resolved).

    An unresolved argument (`FROM $BASE` with no default) is returned as is; the build itself will
    then say what it makes of it.
    """
    args: dict[str, str] = {}
    stages: set[str] = set()
    images: list[str] = []
    unresolved: list[str] = []
    seen_from = False
    for line in _logical_lines(dockerfile):
        instruction, _, rest = line.partition(" ")
        keyword = instruction.upper()
        if keyword == "ARG" and not seen_from:
            name, _, default = rest.strip().partition("=")
            if name and default:
                args[name.strip()] = default.strip().strip('"').strip("'")
        elif keyword == "FROM":
            seen_from = True
            words = [w for w in rest.split() if not w.startswith("--")]
            if not words:
                continue
            image = _substitute(words[0], args)
            earlier_stage = image.lower() in stages
            if len(words) >= 3 and words[1].lower() == "as":
                stages.add(words[2].lower())
            if earlier_stage or image == "scratch":
                continue
            if _UNRESOLVED.search(image):
                unresolved.append(image)
            elif image not in images:
                images.append(image)
    return images, unresolved
