"""Out-of-memory kills in a trial's container, noticed as they happen and reported once. Apart from
environment.py, which runs the commands: reading the kernel's count (the container's own cgroup,
v1 or v2, or the trial's cgroup that holds it) and remembering what was already reported is a job
of its own.
"""

import contextlib
from collections.abc import Callable
from pathlib import Path


class OomWatch:
    """New out-of-memory kills of one container, counted between looks."""

    def __init__(self, kills: Callable[[], int]) -> None:
        self._kills = kills
        """The kills so far, as the container's cgroup counts them."""
        self._seen = 0
        self._pending = False

    def observe(self) -> None:
        """Note new out-of-memory kills while the container's cgroup is there to tell (it goes
        when the container stops; a restarted container counts from zero again)."""
        kills = self._kills()
        if kills > self._seen:
            self._pending = True
        self._seen = kills

    def count_from_zero(self) -> None:
        """The container stopped: when it runs again, its cgroup counts from zero."""
        self._seen = 0

    def problem(self, memory_mb: int) -> str | None:
        """The kills noticed since the last call, reported once (None when there were none)."""
        self.observe()
        if not self._pending:
            return None
        self._pending = False
        return f"out of memory: a process was killed at the {memory_mb} MB limit"


def container_oom_kills(container_id: str) -> int:
    """Out-of-memory kills in the container's memory cgroup (cgroup v1 or v2), 0 when unknown."""
    candidates = (
        Path(f"/sys/fs/cgroup/memory/docker/{container_id}/memory.oom_control"),
        Path(f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/memory.events"),
        Path(f"/sys/fs/cgroup/docker/{container_id}/memory.events"),
    )
    for path in candidates:
        with contextlib.suppress(OSError, ValueError):
            for line in path.read_text().splitlines():
                if line.startswith("oom_kill "):
                    return int(line[len("oom_kill ") :])
    return 0
