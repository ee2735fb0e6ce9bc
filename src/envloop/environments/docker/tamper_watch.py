"""Which of the agent's changes a verifier in a container read: the state a trial's tamper flags
are judged against, kept apart from the environment that runs the commands.

The container's diff from its image is taken once it is set up, before any agent runs (`mark_clean`):
what differs from it later is the agent's doing. Before a verifier runs, the changes since then are
armed for a record of what the verifier opens (access_record.py), or kept as a list to flag by kind
of path where no record can be kept; after it, each changed file it read, executed or followed is a
flag. What envloop itself changes (tests laid over an image's own and taken back, what a verifier
wrote for a later step's) joins the set-up state, so it never flags.
"""

from collections.abc import Sequence

from envloop.core.posix_paths import within
from envloop.environments.docker import access_record
from envloop.environments.docker.cli import DockerError
from envloop.environments.docker.containers import Container
from envloop.environments.docker.layer_changes import Signatures, TooManyChanges, layer_dirs
from envloop.environments.tampering import Tampering, outside, tampering, unchecked, verifier_reads


class TamperWatch:
    """One container's watch: its set-up state, what is armed for the verifier now, and what was
    already flagged (a file or a flood is named once, for the first verifier that touched it)."""

    def __init__(self, container: Container, warnings: list[str]) -> None:
        self._container = container
        self._warnings = warnings
        self._clean: Signatures | None = None
        """The container's diff from its image once set up, before any agent ran."""
        self._watch: access_record.Armed | list[str] | Tampering | None = None
        """What `arm` armed, or the changes to flag by kind where nothing could be, or the flag to
        raise where the changes were too many to read."""
        self._unchecked: int | None = None
        """The limit a reading of the changes went past where no verifier was watched (set-up, a
        directory taken back): the next verifier cannot be checked."""
        self._flagged: set[str] = set()
        """Paths a verifier here was already flagged for."""
        self._flagged_unchecked = False
        """Whether a verifier here was already flagged for changes too many to read."""
        self._before: Signatures = {}
        """The container's changes as the last verifier here started."""

    async def mark_clean(self) -> None:
        """Remember the container as set up: what changes after this is the agent's doing."""
        try:
            self._clean = await self._container.changes()
        except TooManyChanges as exc:
            self._clean, self._unchecked = {}, exc.limit

    async def taken_back(self, path: str) -> None:
        """envloop took back what it laid at `path`: the directory left there is its doing, not the
        agent's, so the set-up state is brought up to date below it."""
        if self._clean is None:
            return
        try:
            now = await self._container.changes()
        except TooManyChanges as exc:
            self._unchecked = exc.limit
            return
        self._clean = {k: v for k, v in self._clean.items() if not within(k, path)}
        self._clean |= {k: v for k, v in now.items() if within(k, path)}

    async def arm(self, own: Sequence[str]) -> None:
        """Before a verifier runs: arm the record of which of the agent's changes since
        `mark_clean` it opens, leaving out the paths under `own` (the agent's workdir and logs, and
        what envloop writes for the verifier). Where none can be kept, remember the changes to flag
        by kind of path; where the changes are too many to read, the verifier is flagged unchecked."""
        self._watch = None
        if self._clean is None:
            return
        if self._unchecked is not None:
            self._watch = unchecked(self._unchecked)
            return
        try:
            now = await self._container.changes()
            layers = await layer_dirs(self._container.id)
            mounted = await self._container.host_root() is not None
        except TooManyChanges as exc:
            self._watch = unchecked(exc.limit)
            return
        except DockerError as exc:
            self._warnings.append(f"what the agent changed could not be listed: {exc}")
            return
        self._before = now
        changed = [path for path, state in now.items() if self._clean.get(path) != state]
        changed += [path for path in self._clean if path not in now]  # made at set-up, then removed
        candidates = outside(changed, list(own))
        if layers is None or not access_record.can_record(layers, mounted):
            self._watch = candidates
            return
        self._watch = await access_record.arm(layers, candidates, mounted)

    async def found(self, steps: bool) -> list[Tampering]:
        """After the verifier `arm` armed for: the changed files it read, executed or followed, by
        kind; where no record was kept, the changes of a kind a verifier may run. With `steps`, what
        the verifier itself wrote joins the set-up state for a later step's verifier."""
        watch, self._watch = self._watch, None
        if watch is None:
            return []
        if isinstance(watch, Tampering):
            # Once: the changes stay too many to read for every later step's verifier.
            self._unchecked = watch.count
            found = [] if self._flagged_unchecked else [watch]
            self._flagged_unchecked = True
            return found
        if isinstance(watch, list):
            found = tampering(path for path in watch if path not in self._flagged)
        else:
            read = [path for path in await access_record.touched(watch) if path not in self._flagged]
            found = verifier_reads(read) + tampering(p for p in watch.unarmed if p not in self._flagged)
        self._flagged.update(path for group in found for path in group.paths)
        if steps:
            agents = set(watch) if isinstance(watch, list) else {*watch.paths, *watch.unarmed}
            await self._count_as_set_up(agents)
        return found

    async def _count_as_set_up(self, agents: set[str]) -> None:
        """What a verifier wrote here (an installed tool, a cache) is no agent's change for a later
        step's verifier: it joins the set-up state. A file of the agent's stays the agent's, and a
        later change to what the verifier wrote is a change again."""
        if self._clean is None:
            return
        try:
            after = await self._container.changes()
        except TooManyChanges as exc:
            self._unchecked = exc.limit  # the verifier's own flood: a later verifier cannot be checked
            return
        except DockerError as exc:
            self._warnings.append(f"what the verifier changed could not be listed: {exc}")
            return
        for path, state in after.items():
            if path not in agents and self._before.get(path) != state:
                self._clean[path] = state
