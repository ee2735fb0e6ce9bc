"""Which directories a command's `mounts` make fresh, and which a previous command was shown that go
first: a later step's agent never sees an earlier step's tests, and a verifier never finds what an
agent left in the directories it is shown.

`Environment.exec` (environments/contract.py) shows each command its mounts through this, and the
provider's `_prepare` clears and places what it says; the choice is here, apart from the contract,
because it is the same for every provider and none of them implements it.
"""

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from envloop.environments.base import EnvironmentSetupError, Mount, Mounts, VisiblePaths
from envloop.tasks.model import HarborTask

FreshDirectory = tuple[str, Sequence[Path] | None]
"""A directory to make fresh, as commands inside name it, and the layers laid over each other there
(None: empty and writable by every user)."""
Prepare = Callable[[list[str], list[FreshDirectory]], Awaitable[None]]
"""A provider's `_prepare`: clear each of the paths, then make each fresh directory."""


class FreshMounts:
    """What the instance's commands were last shown, and what the next command's mounts change."""

    def __init__(
        self, task: HarborTask, visible: VisiblePaths, fresh_home: str, fresh_tmp: str | None
    ) -> None:
        self._task = task
        self._visible = visible
        self._fresh_home = fresh_home
        self._fresh_tmp = fresh_tmp
        self._shown: set[Mount] = set()

    async def show(self, mounts: Mounts, prepare: Prepare) -> None:
        """Fresh tests, solution or verifier logs for this command, through `prepare`; tests and
        solution a previous command was shown go first (a later step's agent never sees an earlier
        step's tests). EnvironmentSetupError when the provider could not."""
        gone, fresh = self._changes(mounts)
        if not gone and not fresh:
            return
        try:
            await prepare(gone, fresh)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise EnvironmentSetupError(f"could not prepare {', '.join(sorted(mounts))}: {reason}") from None
        self._shown = {mount for mount in mounts if mount != "verifier_logs"}

    def _changes(self, mounts: Mounts) -> tuple[list[str], list[FreshDirectory]]:
        """The directories to clear (tests and solution a previous command was shown that this one
        is not) and the ones to make fresh for this command."""
        gone = [path for mount in sorted(self._shown - set(mounts)) if (path := self._path(mount))]
        fresh: list[FreshDirectory] = []
        if "tests" in mounts:
            fresh.append((self._visible.tests, self._task.tests_sources or [self._task.tests_dir]))
        if "solution" in mounts:
            fresh.append((self._visible.solution, [self._task.solution_dir]))
        if "verifier_logs" in mounts:
            fresh.append((self._visible.verifier_logs, None))
        if "fresh_home" in mounts:
            fresh.append((self._fresh_home, None))
        if "fresh_tmp" in mounts and self._fresh_tmp is not None:
            fresh.append((self._fresh_tmp, None))
        return gone, fresh

    def _path(self, mount: Mount) -> str | None:
        paths = {
            "tests": self._visible.tests,
            "solution": self._visible.solution,
            "fresh_home": self._fresh_home,
            "fresh_tmp": self._fresh_tmp,
        }
        return paths.get(mount, self._visible.verifier_logs)
