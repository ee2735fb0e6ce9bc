"""The local, file-only subset of a task's `environment/Dockerfile`.

Without an image builder only three things can be honoured faithfully: `WORKDIR`, `ENV`, and
`COPY`/`ADD` of build-context files into the working directory. Everything else (`RUN`, `FROM`,
`USER`, copies from other stages or URLs, copies outside the workdir) is counted so the trial can
say plainly what did not happen instead of pretending the image was built.
"""

import json
import posixpath
import re
import shlex
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field

from envloop.core.posix_paths import within
from envloop.tasks.model import HarborTask

DEFAULT_WORKDIR = "/app"
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The PATH of the Debian and Ubuntu base images, and of every local instance."""
_IGNORED = frozenset(
    {
        "LABEL",
        "MAINTAINER",
        "EXPOSE",
        "ARG",
        "CMD",
        "ENTRYPOINT",
        "HEALTHCHECK",
        "STOPSIGNAL",
        "SHELL",
        "VOLUME",
    }
)
STOOD_IN_LOCALLY = frozenset({"FROM"})
"""Instructions the local sandbox does not execute but stands in for: the host's system for FROM."""
MAX_LOCAL_COPY_TEXT = 64 << 10
"""The most text of COPY and ADD arguments the local sandbox reads, over the whole Dockerfile: real
ones hold a few hundred bytes, and a megabyte of sources took 16 s to split and look up at push."""
MAX_LOCAL_COPY_SOURCES = 1_000
"""The most COPY and ADD sources the local sandbox looks up in the build context, over the whole
Dockerfile (each is a look-up on disk)."""
_ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
_VAR = re.compile(r"\$(?:\{(\w+)(?::-([^}]*))?\}|(\w+))")
_HEREDOC = re.compile(r"<<-?[\"']?(\w+)[\"']?")


class CopyStep(BaseModel):
    """Copy `source` (inside the build context) to `target`, an absolute path in the environment.

    As in Docker, a directory source contributes its contents to `target`; a file source becomes
    `target` itself unless `into_directory`, when it lands inside it under its own name.
    """

    source: Path
    target: str
    into_directory: bool


class DockerfilePlan(BaseModel):
    workdir: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    copies: list[CopyStep] = Field(default_factory=list)
    skipped: dict[str, int] = Field(default_factory=dict, description="instruction -> count not honoured")

    def not_stood_in(self) -> dict[str, int]:
        """The skipped instructions the local sandbox has no stand-in for: a FROM alone is stood in
        for by the host's system (every local instance runs on it), so it is no warning."""
        return {name: count for name, count in self.skipped.items() if name not in STOOD_IN_LOCALLY}

    def warning(self) -> str | None:
        skipped = self.not_stood_in()
        if not skipped:
            return None
        parts = ", ".join(f"{count} {name}" for name, count in skipped.items())
        noun = "instruction" if sum(skipped.values()) == 1 else "instructions"
        return f"environment/Dockerfile: {parts} {noun} not executed in the local environment"


def _logical_lines(text: str) -> list[str]:
    """Join backslash continuations, drop comments, and fold heredoc bodies into their instruction."""
    lines = text.splitlines()
    out: list[str] = []
    current = ""
    i = 0
    while i < len(lines):
        raw = lines[i]
        i += 1
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        current += stripped
        for marker in _HEREDOC.findall(current):
            while i < len(lines) and lines[i].strip() != marker:
                i += 1
            i += 1
        out.append(current)
        current = ""
    if current:
        out.append(current)
    return out


def _expand(value: str, env: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        default = match.group(2)
        if name in env:
            return env[name]
        return default if default is not None else ""

    return _VAR.sub(replace, value)


def _parse_env(args: str, env: dict[str, str]) -> dict[str, str]:
    if "=" not in args.split(maxsplit=1)[0]:
        key, _, value = args.partition(" ")
        return {key: without_empty_entries(key, _expand(value.strip(), env))}
    pairs: dict[str, str] = {}
    for token in shlex.split(args):
        key, _, value = token.partition("=")
        pairs[key] = without_empty_entries(key, _expand(value, env))
    return pairs


def without_empty_entries(name: str, value: str) -> str:
    """`ENV LD_LIBRARY_PATH=/usr/local/lib:$LD_LIBRARY_PATH` with the variable unset leaves a
    trailing empty entry, which the loader and the shell read as "the current directory": a library
    or program an agent drops in its working directory would then be picked up. Empty entries of
    every `*PATH` variable are dropped."""
    if not name.endswith("PATH") or (":" not in value and value):
        return value
    return ":".join(entry for entry in value.split(":") if entry)


def _copy_args(args: str) -> tuple[list[str], list[str]]:
    """(flags, paths) of a COPY/ADD instruction, in shell or JSON-array form."""
    words = shlex.split(args)
    flags = [w for w in words if w.startswith("--")]
    rest = args
    for flag in flags:
        rest = rest.replace(flag, "", 1)
    rest = rest.strip()
    if rest.startswith("["):
        try:
            paths = json.loads(rest)
        except json.JSONDecodeError:
            paths = []
        return flags, [str(p) for p in paths]
    return flags, [w for w in words if not w.startswith("--")]


def parse_dockerfile(text: str, context: Path, *, workdir_override: str | None = None) -> DockerfilePlan:
    """Read the honoured subset; copies outside the final workdir, and those past the limits on
    what is read of them, are counted as not executed."""
    plan = DockerfilePlan()
    skipped: Counter[str] = Counter()
    env: dict[str, str] = {}
    workdir = "/"
    pending: list[tuple[str, list[str], str, str]] = []
    copy_text = copy_sources = 0
    context_root = context.resolve()
    for line in _logical_lines(text):
        instruction, _, args = line.partition(" ")
        name = instruction.upper()
        args = args.strip()
        if name == "ENV" and args:
            # A base image sets PATH, so `ENV PATH=$PATH:/x` extends it rather than replacing it.
            env.update(_parse_env(args, {"PATH": IMAGE_PATH, **env}))
        elif name == "WORKDIR" and args:
            workdir = posixpath.normpath(posixpath.join(workdir, _expand(args, env)))
            plan.workdir = workdir
        elif name in ("COPY", "ADD"):
            copy_text += len(args)
            if copy_text > MAX_LOCAL_COPY_TEXT:
                skipped[f"{name} (past what the local sandbox reads)"] += 1
                continue
            flags, paths = _copy_args(args)
            copy_sources += len(paths) - 1
            if copy_sources > MAX_LOCAL_COPY_SOURCES:
                skipped[f"{name} (past what the local sandbox reads)"] += 1
                continue
            from_stage = any(f.startswith("--from") for f in flags)
            remote = any(re.match(r"^(https?://|git@)", p) for p in paths[:-1])
            archive = name == "ADD" and any(p.endswith(_ARCHIVE_SUFFIXES) for p in paths[:-1])
            if from_stage or remote or archive or len(paths) < 2:
                skipped[f"{name} (from a stage, URL or archive)"] += 1
            else:
                pending.append((name, paths[:-1], _expand(paths[-1], env), workdir))
        elif name not in _IGNORED:
            skipped[name] += 1
    plan.env = env
    final = posixpath.normpath(workdir_override or plan.workdir or DEFAULT_WORKDIR)
    for name, sources, dest, at in pending:
        target = posixpath.normpath(posixpath.join(at, dest))
        matches = [m for s in sources for m in _context_matches(context_root, s)]
        if not within(target, final) or not matches:
            skipped[f"{name} (outside the workdir or missing source)"] += 1
            continue
        into = dest.endswith("/") or len(matches) > 1
        plan.copies.extend(CopyStep(source=m, target=target, into_directory=into) for m in matches)
    plan.skipped = dict(skipped)
    return plan


def _context_matches(context: Path, pattern: str) -> list[Path]:
    """Paths in the build context matching a COPY source; nothing outside the context is allowed."""
    cleaned = posixpath.normpath(pattern.lstrip("/")) or "."
    if cleaned.startswith(".."):
        return []
    if cleaned == ".":
        return [context]
    if any(ch in cleaned for ch in "*?["):
        found = sorted(context.glob(cleaned))
    else:
        candidate = context / cleaned
        found = [candidate] if candidate.exists() or candidate.is_symlink() else []
    return [p for p in found if p.resolve().is_relative_to(context)]


def read_plan(task: HarborTask) -> DockerfilePlan:
    """What the local sandbox can honour of the task's `environment/Dockerfile` (an empty plan
    without one); OSError when it cannot be read."""
    dockerfile = task.environment_dir / "Dockerfile"
    if not dockerfile.is_file():
        return DockerfilePlan()
    text = dockerfile.read_text(encoding="utf-8", errors="replace")
    return parse_dockerfile(text, task.environment_dir, workdir_override=task.config.environment.workdir)
