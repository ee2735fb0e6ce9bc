"""What passes from the agent's environment to its verifier's: Harbor's artifacts and collect hooks.

After the agent phase, a task's `[[verifier.collect]]` commands snapshot state into files (in the
main container before its processes stop; sidecars' after), then every declared artifact (the task's
`artifacts`, the step's, and the convention directory `/logs/artifacts`) is copied out, masked, into
the trial's `artifacts/` (by its path: `/tmp/x.txt` is kept as `artifacts/tmp/x.txt`). A separate
verifier gets each of them back at its original path; nothing else of the agent's environment
reaches it. A collect hook that fails is noted and never stops the trial, as in Harbor.
"""

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol, runtime_checkable

from envloop.environments import Environment, EnvironmentSetupError
from envloop.tasks.model import HarborTask, TaskStep
from envloop.tasks.task_toml import MAIN_SERVICE, ArtifactEntry, CollectHook

CONVENTION_DIR = "/logs/artifacts"
"""Where an agent publishes files for its verifier without the task declaring them."""


@dataclass
class Handoff:
    """The artifacts kept from one agent phase: (path inside, where it is kept) pairs."""

    kept: list[tuple[str, Path]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def declared(task: HarborTask, step: TaskStep | None) -> list[ArtifactEntry]:
    """The artifact entries of one collection: the convention directory, the task's, the step's."""
    entries = [ArtifactEntry(source=CONVENTION_DIR), *task.config.artifacts]
    if step is not None:
        entries += step.config.artifacts
    seen: set[tuple[str | None, str]] = set()
    unique = []
    for entry in entries:
        key = (entry.service if not entry.on_main else None, entry.source.rstrip("/") or "/")
        if key not in seen:
            seen.add(key)
            unique.append(entry)
    return unique


def hooks(task: HarborTask, step: TaskStep | None) -> list[CollectHook]:
    return [*task.config.verifier.collect, *(step.config.verifier.collect if step else [])]


@runtime_checkable
class WithServices(Protocol):
    """An environment with compose services beside its main container (the docker one)."""

    def service(self, name: str) -> Environment | None: ...


def _in(environment: Environment, service: str | None) -> Environment | None:
    """The environment of `service` (None or main: the agent's own); None when there is none."""
    if service in (None, MAIN_SERVICE):
        return environment
    return environment.service(service) if isinstance(environment, WithServices) else None


async def run_hooks(environment: Environment, found: list[CollectHook], log: Path) -> list[str]:
    """Run the collect hooks, the main container's first, then the sidecars' (as Harbor orders
    them); one note per hook that did not succeed."""
    notes = []
    ordered = sorted(enumerate(found, start=1), key=lambda item: item[1].service != MAIN_SERVICE)
    for number, hook in ordered:
        target = _in(environment, hook.service)
        if target is None:
            notes.append(f"collect hook {number}: the trial has no service {hook.service!r}")
            continue
        try:
            result = await target.exec(
                ["sh", "-c", hook.command],
                user=hook.user if hook.user is not None else "root",
                timeout=hook.timeout_sec,
                stdout_path=log / f"collect-{number}.stdout.txt",
                stderr_path=log / f"collect-{number}.stderr.txt",
            )
        except EnvironmentSetupError as exc:
            notes.append(f"collect hook {number} ({_short(hook.command)}) could not run: {exc}")
            continue
        if result.timed_out:
            notes.append(f"collect hook {number} ({_short(hook.command)}) exceeded {hook.timeout_sec:g} s")
        elif result.exit_code != 0:
            notes.append(
                f"collect hook {number} ({_short(hook.command)}) exited with code {result.exit_code}"
            )
    return notes


async def collect(environment: Environment, entries: list[ArtifactEntry], target: Path) -> Handoff:
    """Copy each artifact out of its container (a missing one is simply not kept). All services
    share one tree, as in Harbor: of two entries that name the same path the first is kept."""
    handoff = Handoff()
    for entry in entries:
        source_env = _in(environment, entry.service)
        if source_env is None:
            handoff.notes.append(f"artifact {entry.source}: the trial has no service {entry.service!r}")
            continue
        app = source_env.visible.app
        source = entry.source if entry.source.startswith("/") else f"{app}/{entry.source}"
        kept = target / PurePosixPath(source).relative_to("/")
        if kept.exists():
            handoff.notes.append(
                f"artifact {source} of {entry.service or MAIN_SERVICE}: already kept from another"
            )
            continue
        notes = await source_env.get_path(source, kept)
        handoff.notes += notes
        if kept.exists():
            handoff.kept.append((source, kept))
    return handoff


async def hand_over(environment: Environment, handoff: Handoff) -> None:
    """Put every kept artifact back at its original path in the verifier's environment."""
    for source, kept in handoff.kept:
        await environment.put_dir(kept, source)


def _short(command: str) -> str:
    text = " ".join(command.split())
    return text if len(text) <= 60 else text[:57] + "…"
