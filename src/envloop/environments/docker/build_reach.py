"""What a build may fetch and keep: no URL, and caches of its own.

`ADD <url>` (and `ADD` of a git repository) is fetched by the builder inside the daemon, on the
host's own network whatever the build's network setting says: a task could read a service that
listens on the host's loopback or its private networks into its image. Nothing can be fetched from
the internet here anyway, so an `ADD` whose source the builder could read as a URL is refused before
the build, in one line: a source with a `:` (every URL and git form has one), and a source built from
a variable any value of which has one or cannot be told.

`RUN --mount=type=cache` keeps a directory between builds under its `id` (the target path when
none is given), daemon-wide: two tasks naming the same id would share it, and one could poison the
other's pip or npm cache. Every cache mount's id is rewritten to start with the image's own
digest, so each task's image has caches of its own (`scope_cache_mounts`); a mount written so that
it cannot be rewritten safely (quoted options, a flag split over lines) is refused.
"""

import json
import re
from collections.abc import Mapping

from envloop.tasks.dockerfile_images import instructions, parser_directives

_VARIABLE = re.compile(r"\$(?:\{(\w+)[^}]*\}|(\w+))")
_PLATFORM_ARGS = frozenset(
    f"{side}{part}" for side in ("TARGET", "BUILD") for part in ("PLATFORM", "OS", "ARCH", "VARIANT")
)
"""The builder's own ARGs (`linux/amd64`, `amd64`): never a URL."""
_OPERATOR = re.compile(r"\$\{\w+:")
"""`${NAME:-default}`: its colon is the variable's operator, not part of the source."""


def _escape(lines: list[str]) -> str:
    return "`" if parser_directives(lines).get("escape", (0, ""))[1] == "`" else "\\"


def _values(lines: list[str], build_args: Mapping[str, str]) -> dict[str, list[str]]:
    """What each ARG and ENV name may hold, from the Dockerfile and the build args: an instruction
    with a `:` or a `$` anywhere (quotes can hide which name a piece belongs to) gives each name it
    declares a value with both."""
    found: dict[str, list[str]] = {name: [value] for name, value in build_args.items()}
    for instruction in instructions(lines, _escape(lines)):
        if instruction.keyword not in ("ARG", "ENV"):
            continue
        words = instruction.args.split()
        legacy = instruction.keyword == "ENV" and bool(words) and "=" not in words[0]
        names = [words[0]] if legacy else [word.partition("=")[0] for word in words]
        doubtful = any(char in instruction.args for char in ":$")
        for name in names:
            found.setdefault(name, []).append(":$" if doubtful else "")
    return found


def _sources(args: str) -> list[str]:
    """The sources of an ADD (its destination and flags left out), in shell or JSON form."""
    words = args.split()
    while words and words[0].startswith("--"):
        words.pop(0)
    rest = " ".join(words)
    if rest.startswith("["):
        try:
            parsed = json.loads(rest)
        except json.JSONDecodeError:
            return words[:-1]
        return [str(word) for word in parsed[:-1]] if isinstance(parsed, list) else words[:-1]
    return words[:-1]


def _may_be_remote(source: str, values: dict[str, list[str]]) -> bool:
    if ":" in _OPERATOR.sub("${", source):
        return True
    for match in _VARIABLE.finditer(source):
        name = match.group(1) or match.group(2)
        if name in _PLATFORM_ARGS:
            continue
        # A name given no value here takes one from the base image's ENV, which is not read here.
        known = values.get(name)
        if known is None or any(":" in value or "$" in value for value in known):
            return True
    return False


def remote_adds(dockerfile: str, build_args: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(what, why) per `ADD` source (also under ONBUILD) that the builder could fetch."""
    lines = dockerfile.splitlines()
    values = _values(lines, build_args or {})
    refusals: list[tuple[str, str]] = []
    for instruction in instructions(lines, _escape(lines)):
        keyword, args = _keyword_and_args(instruction.keyword, instruction.args)
        if keyword != "ADD":
            continue
        for source in _sources(args):
            if _may_be_remote(source, values):
                refusals.append(
                    (
                        f"ADD {source[:120]}",
                        "a build fetches nothing by URL here (the builder would fetch it on the host's "
                        "own network); put the file in the build context",
                    )
                )
    return refusals


def _keyword_and_args(keyword: str, args: str) -> tuple[str, str]:
    """The instruction an `ONBUILD` carries (it runs when a later stage builds FROM this one)."""
    if keyword != "ONBUILD":
        return keyword, args
    inner, _, rest = args.partition(" ")
    return inner.upper(), rest.strip()


def _leading_flags(args: str) -> list[str]:
    flags = []
    for word in args.split():
        if not word.startswith("--"):
            break
        flags.append(word)
    return flags


def scope_cache_mounts(dockerfile: str, scope: str) -> tuple[str, list[tuple[str, str]]]:
    """(the Dockerfile with each cache mount's id prefixed by `scope`, one-line refusals of the
    cache mounts that cannot be rewritten safely)."""
    lines = dockerfile.splitlines(keepends=True)
    refusals: list[tuple[str, str]] = []
    bare = [line.rstrip("\r\n") for line in lines]
    for instruction in instructions(bare, _escape(bare)):
        keyword, args = _keyword_and_args(instruction.keyword, instruction.args)
        if keyword != "RUN":
            continue
        span = "".join(lines[instruction.lines.start : instruction.lines.stop])
        for word in _leading_flags(args):
            if not word.startswith("--mount="):
                continue
            flag = word.removeprefix("--mount=")
            scoped, problem = _scoped(flag, scope)
            if problem is not None:
                refusals.append((f"RUN --mount={flag[:120]}", problem))
                continue
            if scoped is None:
                continue
            places = _standalone(span, word)
            if len(places) != 1:
                refusals.append(
                    (
                        f"RUN --mount={flag[:120]}",
                        "a cache mount must be written whole on one line, between blanks, once per RUN",
                    )
                )
                continue
            span = span[: places[0]] + f"--mount={scoped}" + span[places[0] + len(word) :]
        lines[instruction.lines.start : instruction.lines.stop] = [span] + [""] * (len(instruction.lines) - 1)
    return "".join(lines), refusals


def _standalone(span: str, word: str) -> list[int]:
    """Where `word` stands alone in the instruction's text: after a blank (or a line ended by a
    blank and the escape) and before one. A flag the builder would join with the next line (an
    escape right after it) could carry an id of its own past the rewrite."""
    found = []
    start = span.find(word)
    while start >= 0:
        before, after = span[:start], span[start + len(word) : start + len(word) + 1]
        joined_line = re.search(r"\s[\\`]\r?\n$", before) is not None
        if (before.endswith((" ", "\t")) or joined_line) and after in (" ", "\t"):
            found.append(start)
        start = span.find(word, start + 1)
    return found


def cache_scope(digest: str) -> str:
    """The prefix of every cache id of the image built under `digest` (fixed length, so no
    image's prefix starts another's)."""
    return "envloop-" + digest.rpartition(":")[2][:32]


def _scoped(flag: str, scope: str) -> tuple[str | None, str | None]:
    """(the mount's options with its id under `scope`, or None for a mount that is not a cache;
    why it cannot be rewritten)."""
    if any(char in flag for char in "\"'\\`"):
        # The builder unquotes a mount's options: a type spelled in pieces would pass unseen.
        return None, "quoted or escaped mount options are not accepted here"
    options = {}
    for option in flag.split(","):
        key, _, value = option.partition("=")
        options[key.strip().lower()] = value
    kind = options.get("type", "bind").lower()
    if "$" in kind:
        return None, "a mount's type must be written out, not taken from a variable"
    if kind != "cache":
        return None, None
    target = options.get("target") or options.get("dst") or options.get("destination") or ""
    kept = [part for part in flag.split(",") if part.partition("=")[0].strip().lower() != "id"]
    return ",".join([*kept, f"id={scope}/{options.get('id') or target}"]), None
