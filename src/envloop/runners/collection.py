"""The collection phase's work: what the worker captured and what the agent's and the verifier's
commands left in their log directories become the trial's kept artifacts, secrets masked."""

import asyncio
import shutil

from envloop.core.trial import TrialSpec
from envloop.environments import Environment
from envloop.environments.keeping import keep_tree, move_plain_tree
from envloop.runners.shell_phases import captures_dir

_INLINE_ARTIFACT_ENTRIES = 64


async def keep_artifacts(environment: Environment, spec: TrialSpec) -> str:
    """The agent's and the verifier's logs: the output the worker captured, then what the
    commands left in their log directories inside, copied out by the environment (secrets
    masked; a name the capture already took gets a numbered sibling). Returns what was kept,
    for the collection phase's log."""
    lines = await keep_captures(spec)
    for source, name in (
        (environment.visible.agent_logs, "agent"),
        (environment.visible.verifier_logs, "verifier"),
    ):
        notes = await environment.get_dir(source, spec.artifacts_dir / name)
        lines.append(f"{name}: copied out of {source}")
        lines += [f"{name}: {note}" for note in notes]
    return "\n".join(lines) + "\n"


async def keep_captures(spec: TrialSpec) -> list[str]:
    """Keep the output streams the worker captured apart (there are secrets to mask: copied
    masked, moved only when none of them is set), then drop the capture directory; what it says
    it kept. Output captured where it is kept needs nothing more."""
    captures = captures_dir(spec)
    if captures == spec.artifacts_dir:
        return ["output captured by the worker: written where it is kept (no secret to mask)"]
    if not captures.is_dir():
        return []
    lines = []
    for source in sorted(captures.iterdir()):
        target = spec.artifacts_dir / source.name
        notes: list[str] = []
        if not move_plain_tree(source, target, spec.secret_values, _INLINE_ARTIFACT_ENTRIES):
            notes = await asyncio.to_thread(keep_tree, source, target, spec.secret_values)
        lines.append(f"{source.name}: output captured by the worker")
        lines += [f"{source.name}: {note}" for note in notes]
    try:
        captures.rmdir()
    except OSError:
        await asyncio.to_thread(shutil.rmtree, captures, True)
    return lines
