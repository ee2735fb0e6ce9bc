"""The images a Dockerfile needs from the daemon, read before building so a missing one is named plainly.

Nothing can be pulled on these machines, so a build whose image is not present locally can only
fail; reading the Dockerfile first turns the builder's registry error into "FROM ubuntu:24.04: not
available here", and lets a job refuse such a task before it runs. Three instructions name images:
`FROM IMAGE`, `COPY --from=IMAGE` and `RUN --mount=…,from=IMAGE`. Stage names (`FROM base AS
build` … `FROM build`, `COPY --from=build`), stage indexes (`--from=0`) and `scratch` are not
images. Variables are substituted as the builder would: in FROM the ARGs declared before the first
FROM, in `--from` the stage's own ARGs and ENVs, each ARG taking its build arg's value when given.
A reference left with a variable no value is known for is `unresolved`, and not built (see
environments/docker/prepare.py): the builder could resolve it to any image.

Parser directives (`# syntax=`, `# escape=`) count only at the very top, as BuildKit reads them;
heredoc bodies are not instructions. Each use keeps the physical lines it was written on, so it
can be rewritten in place (see environments/docker/prepare.py).
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

ImageUseKind = Literal["FROM", "COPY --from", "RUN --mount from"]

_VARIABLE = re.compile(r"\$(?:\{(\w+)(?::?-([^}]*))?\}|(\w+))")
_DIRECTIVE = re.compile(r"#\s*([A-Za-z]+)\s*=\s*(.*?)\s*")
_DIRECTIVES = frozenset({"syntax", "escape", "check"})
_HEREDOC = re.compile(r"<<-?[\"']?(\w+)[\"']?")
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Instruction:
    keyword: str
    """Upper-case: FROM, RUN, …"""
    args: str
    """The rest of the instruction, continuation lines joined."""
    lines: range
    """The physical lines it is written on (its heredoc bodies not included)."""


@dataclass(frozen=True)
class ImageUse:
    kind: ImageUseKind
    written: str
    """The reference as the Dockerfile spells it (`$BASE`, `python:3.12-slim`)."""
    image: str
    """The reference with the ARG defaults substituted."""
    lines: range


@dataclass(frozen=True)
class DockerfileImages:
    directives: dict[str, tuple[int, str]]
    """Parser directive name (lower-case) -> (its line, its value)."""
    uses: list[ImageUse]
    """Each use of an image, in order (stages and `scratch` left out)."""
    unresolved: list[str]
    """Uses naming a variable with no known value (`FROM $BASE`), as `KIND reference`."""

    @property
    def images(self) -> list[str]:
        return list(dict.fromkeys(use.image for use in self.uses))


def parser_directives(lines: list[str]) -> dict[str, tuple[int, str]]:
    """The directives at the top: the first line that is not one (a comment, a blank line, an
    instruction, a repeated directive) ends them."""
    found: dict[str, tuple[int, str]] = {}
    for index, line in enumerate(lines):
        match = _DIRECTIVE.fullmatch(line.strip())
        name = match.group(1).lower() if match else None
        if match is None or name not in _DIRECTIVES or name in found:
            break
        found[name] = (index, match.group(2))
    return found


def instructions(lines: list[str], escape: str = "\\") -> list[Instruction]:
    """The instructions with their continuations joined; comment and blank lines (also inside a
    continuation) and heredoc bodies are skipped."""
    found: list[Instruction] = []
    current = ""
    start: int | None = None
    index = 0
    while index < len(lines):
        stripped = lines[index].strip()
        index += 1
        if not stripped or stripped.startswith("#"):
            continue
        if start is None:
            start = index - 1
        if stripped.endswith(escape):
            current += stripped[: -len(escape)] + " "
            continue
        current += stripped
        keyword, *rest = _WHITESPACE.split(current, maxsplit=1)
        found.append(Instruction(keyword.upper(), rest[0] if rest else "", range(start, index)))
        if keyword.upper() in ("RUN", "COPY", "ADD"):
            for marker in _HEREDOC.findall(current):
                while index < len(lines) and lines[index].strip() != marker:
                    index += 1
                index += 1
        current, start = "", None
    if start is not None and current.strip():
        keyword, *rest = _WHITESPACE.split(current.strip(), maxsplit=1)
        found.append(Instruction(keyword.upper(), rest[0] if rest else "", range(start, len(lines))))
    return found


def _substitute(value: str, args: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        if name in args:
            return args[name]
        default = match.group(2)
        return default if default is not None else match.group(0)

    return _VARIABLE.sub(replace, value)


def _leading_flags(args: str) -> list[str]:
    flags = []
    for word in args.split():
        if not word.startswith("--"):
            break
        flags.append(word)
    return flags


def _declared_args(
    args: str, into: dict[str, str], build_args: Mapping[str, str], outer: Mapping[str, str]
) -> None:
    """An ARG's names with their values: a build arg's, else the default, else (inside a stage) the
    value of the same global ARG."""
    for word in args.split():
        name, equals, default = word.partition("=")
        name = name.strip()
        value = build_args.get(name, default.strip().strip('"').strip("'") if equals else outer.get(name))
        if value:
            into[name] = value


def _declared_env(args: str, into: dict[str, str]) -> None:
    words = args.split()
    if words and "=" not in words[0]:
        into[words[0]] = args[len(words[0]) :].strip()
        return
    for word in words:
        name, equals, value = word.partition("=")
        if equals:
            into[name] = value.strip('"').strip("'")


def read_images(dockerfile: str, build_args: Mapping[str, str] | None = None) -> DockerfileImages:
    """Every image the Dockerfile uses, where, and its parser directives. `build_args` are the
    `--build-arg` values the build gets: they override ARG defaults as the builder's do."""
    given = build_args or {}
    lines = dockerfile.splitlines()
    directives = parser_directives(lines)
    escape = "`" if directives.get("escape", (0, ""))[1] == "`" else "\\"
    args: dict[str, str] = {}
    stage_vars: dict[str, str] = {}
    """A stage's ARG and ENV values, which `COPY --from` and `RUN --mount` may name."""
    stages: set[str] = set()
    uses: list[ImageUse] = []
    unresolved: list[str] = []

    def use(kind: ImageUseKind, written: str, lines: range, known: dict[str, str]) -> None:
        image = _substitute(written, known)
        if "$" in image:
            unresolved.append(f"{kind} {image}")
        elif image.lower() != "scratch" and (kind == "FROM" or image.lower() not in stages):
            uses.append(ImageUse(kind, written, image, lines))

    seen_from = False
    for instruction in instructions(lines, escape):
        keyword, rest = instruction.keyword, instruction.args
        if keyword == "ARG":
            _declared_args(rest, stage_vars if seen_from else args, given, args if seen_from else {})
        elif keyword == "ENV" and seen_from:
            _declared_env(rest, stage_vars)
        elif keyword == "FROM":
            seen_from = True
            stage_vars = {}
            words = [w for w in rest.split() if not w.startswith("--")]
            if not words:
                continue
            earlier_stage = _substitute(words[0], args).lower() in stages
            if len(words) >= 3 and words[1].lower() == "as":
                stages.add(words[2].lower())
            if not earlier_stage:
                use("FROM", words[0], instruction.lines, args)
        elif keyword == "COPY":
            for flag in _leading_flags(rest):
                source = flag.removeprefix("--from=")
                if source != flag and source and not source.isdigit():
                    use("COPY --from", source, instruction.lines, stage_vars)
        elif keyword == "RUN":
            for flag in _leading_flags(rest):
                if flag.startswith("--mount="):
                    for option in flag.removeprefix("--mount=").split(","):
                        key, _, source = option.partition("=")
                        if key.lower() == "from" and source and not source.isdigit():
                            use("RUN --mount from", source, instruction.lines, stage_vars)
    return DockerfileImages(directives=directives, uses=uses, unresolved=list(dict.fromkeys(unresolved)))
